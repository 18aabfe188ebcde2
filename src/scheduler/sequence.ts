/**
 * One request's record on the worker, from admission to the end of its
 * retention (the shape of nano-vllm's `Sequence`): every phase reads and
 * writes this one object, so a request's state lives in one place.
 *
 *   admit ─▶ fetching ─┬──────────────▶ prefill ──▶ decode ──▶ finished ──▶ retained ──▶ adopted by a next turn
 *            lookup,   │  ▲              chunks      one row     store the     (KV kept in    (its KV continues
 *            load      ▼  │ blocker      per step    per step    reply's       the pool)      the new request)
 *                    deferred stored                             blocks           │
 *                   (single-flight.ts)                                            └─ evicted: KV freed
 *
 *   prefillOnly: prefill ──▶ storing (written through) ──▶ finished
 *   cancel: any phase ends at the next step at the latest (a fetch or a write ends when its I/O returns)
 *
 * Invariants:
 * - `fedTokens` mirrors the engine sequence's KV exactly (its length is the KV's token count).
 * - `storedBlocks` full blocks of `fedTokens` have been handed to the cache; they are never handed again.
 * - `keys` (when the worker has a cache) is the prompt's key chain, hashed once at admission and handed to
 *   lookup, the single-flight registry and store; blocks past the prompt (the reply's) are keyed by the cache.
 * - A `retained` record owns its KV until a next turn adopts it (`adopt`) or the pool evicts it.
 */
import { TokenIds } from '../../inference-core/index.ts';

import type { JobEvent, RequestSpec } from './job.ts';
import type { EngineSequence, PrefixKeys, SpeculativeDecoder, TokenSampler } from './ports.ts';

export type SequencePhase = 'fetching' | 'deferred' | 'prefill' | 'decode' | 'storing' | 'finished' | 'retained';

export class RequestSequence {
  phase: SequencePhase = 'fetching';
  /** The engine's KV for this request (null until the fetch adopted or created one). */
  kv: EngineSequence | null = null;
  sampler: TokenSampler | null = null;
  /** Set at the first decode step when the job decodes speculatively (null: plain decoding). */
  speculative?: SpeculativeDecoder | null;
  /** The cache namespace (model fingerprint + tenant salt), set at lookup. */
  namespace: unknown = null;
  /** Key chain of the prompt's full blocks, hashed once at admission (null without a cache). */
  keys: PrefixKeys | null = null;
  /** Tokens whose KV is in `kv`: the prompt's computed part, then the reply as it is fed. */
  fedTokens = new TokenIds(0);
  /** Prompt tokens the KV must hold before the first token is sampled (whole blocks only for prefillOnly). */
  readonly promptTarget: number;
  generated: number[] = [];
  /** Full blocks of `fedTokens` already handed to the cache. */
  storedBlocks = 0;

  // What the fetch found, until the prefill phase adopts it.
  /** Payloads of cached blocks to import, from block `reusable / blockTokens`. */
  loaded: Uint8Array[] = [];
  /** Hands the read buffers of `loaded` back to the tier (after the import, or when they are not imported). */
  releaseLoaded: (() => void) | null = null;
  /** A retained record whose KV this request continues (its first `reusable` tokens are this prompt's). */
  donor: RequestSequence | null = null;
  reusable = 0;

  /** Single flight: the store tick when this request's last lookup started, and whether it already looked again once. */
  lookupTick = 0;
  lookedAgain = false;
  /** Deferred (single flight): waits until `waitFor` has stored `waitBlocks` blocks, starts decoding, or is gone. */
  waitFor: RequestSequence | null = null;
  waitBlocks = 0;
  /** Steps in a row this prompt got no prefill tokens (step-plan.ts ages it). */
  skipped = 0;
  cancelled = false;

  // Figures the prefilled/done events report.
  cachedTokens = 0;
  recomputedHitTokens = 0;
  readonly startedAt: number;
  readonly queueMs: number;
  lookupMs = 0;
  loadMs = 0;
  prefillStartedAt = 0;
  prefillTokens = 0;
  storageError?: string;

  constructor(
    readonly job: RequestSpec,
    /** Admission order: earlier requests own a shared prefix, ties in chunk planning go to the earlier. */
    readonly order: number,
    blockTokens: number,
    now: number,
  ) {
    this.promptTarget = job.prefillOnly ? Math.floor(job.tokens.length / blockTokens) * blockTokens : job.tokens.length;
    this.startedAt = now;
    this.queueMs = Math.max(0, Date.now() - job.submittedAt);
  }

  get tenantSalt(): string {
    return this.job.tenantSalt;
  }

  /** Pages this request will hold at most (prompt + max_tokens), and those it holds already. */
  pagesStillToTake(blockTokens: number): number {
    const pages = Math.ceil((this.job.tokens.length + this.job.sampling.maxTokens) / blockTokens);
    return pages - (this.kv ? Math.ceil(this.fedTokens.length / blockTokens) : 0);
  }

  /** Lets go of what the fetch loaded: imported into the KV, or not needed (deferred, cancelled, failed). */
  dropLoaded(): void {
    const release = this.releaseLoaded;
    this.loaded = [];
    this.releaseLoaded = null;
    release?.();
  }

  /** Takes over a retained record's KV, truncated to the `reusable` tokens this prompt shares with it. */
  adopt(donor: RequestSequence, reusable: number): void {
    this.kv = donor.kv;
    donor.kv = null;
    donor.phase = 'finished';
    this.kv!.truncate(reusable);
  }

  /** The prefilled event: cache usage and timings of the prompt phase. */
  prefilledEvent(cached: boolean, blockTokens: number, now: number): Extract<JobEvent, { type: 'prefilled' }> {
    const promptBlocks = Math.floor(this.job.tokens.length / blockTokens);
    return {
      type: 'prefilled',
      promptTokens: this.job.tokens.length,
      cachedTokens: this.cachedTokens,
      storedPromptTokens: cached ? Math.max(0, promptBlocks - Math.floor(this.cachedTokens / blockTokens)) * blockTokens : 0,
      queueMs: this.queueMs,
      lookupMs: this.lookupMs,
      loadMs: this.loadMs,
      prefillMs: now - this.prefillStartedAt,
      ...(this.recomputedHitTokens > 0 ? { recomputedHitTokens: this.recomputedHitTokens } : {}),
      ...(this.storageError ? { storageError: this.storageError } : {}),
    };
  }

  doneEvent(reason: 'stop' | 'length' | 'cancelled', now: number): Extract<JobEvent, { type: 'done' }> {
    return {
      type: 'done',
      finishReason: reason,
      completionTokens: this.generated.length,
      workerMs: now - this.startedAt,
      decodeTokens: Math.max(0, this.generated.length - 1),
      prefillTokens: this.prefillTokens,
      ...(this.speculative ? { speculative: { proposed: this.speculative.stats.proposed, accepted: this.speculative.stats.accepted } } : {}),
    };
  }
}
