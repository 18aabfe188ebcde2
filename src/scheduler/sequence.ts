/**
 * One request's record on the worker, from admission to the end of its
 * retention, in the shape of nano-vllm's `Sequence`: a status, the request's
 * own state (its KV, decoder, key chain, tokens) and getters for the rest.
 * Every per-request thing on the worker lives here; the scheduler's
 * postprocess (postprocess.ts) is the one place that changes `status`.
 *
 *   admit ─▶ Fetching ─┬──────────────▶ Prefill ──▶ Decode ──▶ Finished ──▶ Retained ──▶ adopted by a next turn
 *            lookup,   │  ▲              chunks      one row     store the     (KV kept in    (its KV continues
 *            load      ▼  │ blocker      per step    per step    reply's       the pool)      the new request)
 *                    Deferred stored                             blocks           │
 *                   (single-flight.ts)                                            └─ evicted: KV freed
 *
 *   prefillOnly: Prefill ──▶ Storing (written through) ──▶ Finished
 *   cancel: any status ends at the next step at the latest (a fetch or a write ends when its I/O returns)
 *
 * Invariants:
 * - `fedTokens` mirrors the engine sequence's KV exactly (its length is the KV's token count).
 * - `storedBlocks` full blocks of `fedTokens` have been handed to the cache; they are never handed again.
 * - `prefix.keys` (when the worker has a cache) is the prompt's key chain, hashed once at admission and handed
 *   to lookup, the single-flight registry and store; blocks past the prompt (the reply's) are keyed by the cache.
 * - A `Retained` record owns its KV until a next turn adopts it or the pool evicts it.
 */
import { TokenIds } from '../../inference-core/index.ts';
import type { KvNamespace, PrefixChain } from '../kvtier/index.ts';

import type { JobEvent, RequestSpec } from './job.ts';
import type { EngineSequence, SequenceDecoder, SpeculativeDecoder } from './ports.ts';
import type { FetchedUnit } from './units.ts';

export enum SequenceStatus {
  Fetching = 'fetching',
  Deferred = 'deferred',
  Prefill = 'prefill',
  Decode = 'decode',
  Storing = 'storing',
  Finished = 'finished',
  Retained = 'retained',
}

export type FinishReason = 'stop' | 'length' | 'cancelled';

/** What a fetch found, until the prefill adopts it (or drops it: deferred, cancelled, failed). */
export interface Fetched {
  /** Payloads of cached blocks to import, from block `reusable / blockTokens`. */
  loaded: Uint8Array[];
  /** Hands the read buffers of `loaded` back to the tier (after the import, or when they are not imported). */
  release: (() => void) | null;
  /** A retained record whose KV this request continues (its first `reusable` tokens are this prompt's). */
  donor: RequestSequence | null;
  reusable: number;
  /** Unit mode (units.ts): the unit to import instead of blocks (null: a miss). */
  unit?: FetchedUnit | null;
}

/** Unit mode (units.ts): where the prefill stops to write units, the detected common prefix's end, the last unit written. */
export interface UnitMarks {
  stops: number[];
  commonEnd: number;
  lastAt: number;
}

export interface QueuePlace {
  /** Admission order: earlier requests own a shared prefix, ties in chunk planning go to the earlier. */
  readonly order: number;
  /** Steps in a row this prompt got no prefill tokens (schedule.ts ages it). */
  skipped: number;
}

/** Single flight (single-flight.ts): when the last lookup started, whether it looked again, whom it waits for. */
export interface FlightState {
  lookupTick: number;
  /** Blocks the lookup found when it last looked again (-1: never): a look again must find more. */
  lookedAgainAt: number;
  waitFor: RequestSequence | null;
  waitBlocks: number;
}

/** The figures the prefilled and done events report. */
export interface SequenceFigures {
  readonly startedAt: number;
  readonly queueMs: number;
  cachedTokens: number;
  recomputedHitTokens: number;
  lookupMs: number;
  loadMs: number;
  prefillStartedAt: number;
  /** A storage fault during lookup/load that was degraded to a miss. */
  storageError?: string;
}

export class RequestSequence {
  status = SequenceStatus.Fetching;
  /** The engine's KV for this request (null until the fetch adopted or created one). */
  kv: EngineSequence | null = null;
  /** Its sampler, grammar and speculative session (made when the prompt is in the KV; speculative at the first decode step). */
  decoding: { decoder: SequenceDecoder; speculative?: SpeculativeDecoder | null } | null = null;
  /** The cache namespace (model fingerprint + tenant salt) and the prompt's key chain (null: unkeyed), set at the first lookup. */
  prefix: { namespace: KvNamespace; keys: PrefixChain | null } | null = null;
  /** Tokens whose KV is in `kv`: the prompt's computed part, then the reply as it is fed. */
  fedTokens = new TokenIds(0);
  generated: number[] = [];
  /** Full blocks of `fedTokens` already handed to the cache. */
  storedBlocks = 0;
  fetched: Fetched | null = null;
  /** Unit mode (units.ts): prompt positions where the prefill stops to write a unit, the detected common prefix's end, the last unit written. */
  readonly units: UnitMarks = { stops: [], commonEnd: 0, lastAt: 0 };
  readonly flight: FlightState = { lookupTick: 0, lookedAgainAt: -1, waitFor: null, waitBlocks: 0 };
  cancelled = false;
  readonly figures: SequenceFigures;
  /**
   * Prompt tokens the KV must hold before the first token is sampled: for prefillOnly whole blocks
   * only, or with units (units.ts) all but the last token — the unit the decode worker continues from.
   */
  readonly promptTarget: number;

  /** Its place in the scheduler's queue (schedule.ts, single-flight.ts). */
  readonly queue: QueuePlace;

  constructor(
    readonly spec: RequestSpec,
    order: number,
    blockTokens: number,
    now: number,
    units = false,
  ) {
    this.queue = { order, skipped: 0 };
    const n = spec.tokens.length;
    this.promptTarget = !spec.prefillOnly ? n : units ? n - 1 : Math.floor(n / blockTokens) * blockTokens;
    this.figures = { startedAt: now, queueMs: Math.max(0, Date.now() - spec.submittedAt), cachedTokens: 0, recomputedHitTokens: 0, lookupMs: 0, loadMs: 0, prefillStartedAt: 0 };
  }

  get id(): string {
    return this.spec.id;
  }

  get tenantSalt(): string {
    return this.spec.tenantSalt;
  }

  get keys(): PrefixChain | null {
    return this.prefix?.keys ?? null;
  }

  /** Prompt tokens still to prefill. */
  get remainingPrompt(): number {
    return this.promptTarget - this.fedTokens.length;
  }

  /** Prompt tokens this request computed (not cached). */
  get prefillTokens(): number {
    return Math.max(0, Math.min(this.fedTokens.length, this.promptTarget) - this.figures.cachedTokens);
  }

  /** Prompt tokens the next chunk may take before a unit stop (units.ts); Infinity when none is ahead. */
  get tokensUntilUnit(): number {
    const from = this.fedTokens.length;
    const next = this.units.stops.find((p) => p > from);
    return next === undefined ? Infinity : next - from;
  }

  get lastToken(): number {
    return this.generated[this.generated.length - 1];
  }

  get speculative(): SpeculativeDecoder | null {
    return this.decoding?.speculative ?? null;
  }

  /** Pages this request will hold at most (prompt + max_tokens), and those it holds already. */
  pagesStillToTake(blockTokens: number): number {
    const pages = Math.ceil((this.spec.tokens.length + this.spec.sampling.maxTokens) / blockTokens);
    return pages - (this.kv ? Math.ceil(this.fedTokens.length / blockTokens) : 0);
  }

  /** Lets go of what the fetch loaded: imported into the KV, or not needed (deferred, cancelled, failed). */
  dropLoaded(): void {
    const release = this.fetched?.release;
    if (this.fetched) {
      this.fetched.loaded = [];
      this.fetched.unit = null;
      this.fetched.release = null;
    }
    release?.();
  }

  /** The prefilled event: cache usage and timings of the prompt phase. */
  prefilledEvent(cached: boolean, blockTokens: number, now: number): Extract<JobEvent, { type: 'prefilled' }> {
    const f = this.figures;
    const promptBlocks = Math.floor(this.spec.tokens.length / blockTokens);
    return {
      type: 'prefilled',
      promptTokens: this.spec.tokens.length,
      cachedTokens: f.cachedTokens,
      storedPromptTokens: cached ? Math.max(0, promptBlocks - Math.floor(f.cachedTokens / blockTokens)) * blockTokens : 0,
      queueMs: f.queueMs,
      lookupMs: f.lookupMs,
      loadMs: f.loadMs,
      prefillMs: now - f.prefillStartedAt,
      ...(f.recomputedHitTokens > 0 ? { recomputedHitTokens: f.recomputedHitTokens } : {}),
      ...(f.storageError ? { storageError: f.storageError } : {}),
    };
  }

  doneEvent(reason: FinishReason, now: number): Extract<JobEvent, { type: 'done' }> {
    const speculative = this.speculative;
    return {
      type: 'done',
      finishReason: reason,
      completionTokens: this.generated.length,
      workerMs: now - this.figures.startedAt,
      decodeTokens: Math.max(0, this.generated.length - 1),
      prefillTokens: this.prefillTokens,
      ...(speculative ? { speculative: { proposed: speculative.stats.proposed, accepted: speculative.stats.accepted } } : {}),
    };
  }
}
