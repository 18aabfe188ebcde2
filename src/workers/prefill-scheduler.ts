/**
 * The prefill worker's loop, on the thread that owns the engine.
 *
 *   submit ─▶ waiting ─▶ fetching ───────────────▶ prefill ─────────────▶ decode ─▶ done
 *                        lookup longest cached      chunks of the uncached   one row per step
 *                        prefix, load (or not:      rest, shortest first     until stop / max_tokens
 *                        fetch-or-recompute),       (step-plan.ts); full
 *                        import into a sequence     blocks stored per chunk
 *                              │ ▲
 *                              ▼ │ blocks of the shared prefix stored
 *                           deferred (single flight)
 *
 * Every step is one engine forward carrying all decoding sequences' next
 * tokens and the chosen prefill chunks together, so replies keep streaming
 * while prompts are computed, and a cached turn's short suffix is not stuck
 * behind another session's cold prompt. Lookups and loads are I/O and run
 * between steps.
 *
 * Single flight: a job whose prompt shares more whole blocks with an earlier
 * admitted, unfinished prompt than its own lookup found waits until that
 * prompt has stored those blocks, then looks up again (and hits them: the
 * cache holds handed-off blocks at once). So concurrent requests sharing an
 * uncached prefix compute it once per worker.
 *
 * At the end of a reply the last sampled token is fed too when that
 * completes a block, and the reply's full blocks are stored: the next turn
 * (prompt + reply + …) hits them. A `prefillOnly` job (the prefill half of a
 * prefill/decode split) stops after its prompt's full blocks are durably
 * stored; the decode worker then loads them.
 *
 * Storage faults never fail a job: lookup/load errors become a miss (full
 * prefill), store errors are counted; both are reported to `onStorageError`.
 */
import type { FetchOrRecompute } from '../cluster/index.ts';
import type { JobEvent, PrefillJob } from './job.ts';
import type { CacheTier, EngineModel, EngineSequence, SpeculativeDecoder, TokenSampler } from './ports.ts';
import { RetainedSequences, type RetainedSequence } from './retained-sequences.ts';
import { commonFullBlocks, planPrefillChunks } from './step-plan.ts';

export interface SchedulerOptions {
  engine: EngineModel;
  cache: CacheTier | null;
  blockTokens: number;
  maxBatch: number;
  emit: (jobId: string, event: JobEvent) => void;
  createSampler: (job: PrefillJob) => TokenSampler;
  /**
   * Speculative decoding for a job whose first token is sampled: `context` is
   * the prompt and that token, the sequence's KV holds all but the last.
   * Null (or absent): plain decoding.
   */
  createSpeculative?: (job: PrefillJob, sequence: EngineSequence, context: readonly number[]) => SpeculativeDecoder | null;
  /**
   * Plans the speculative decoders of one step together (e.g. their draft-model
   * steps batched in one draft forward per position); result i is
   * `batch[i].decoder.plan(batch[i].limit)`. Absent: each plans alone.
   */
  planSpeculative?: (batch: readonly { decoder: SpeculativeDecoder; limit: number }[]) => { tokens: number[] }[];
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  /** Tokens one step carries (decode rows + prefill chunks); default 128, at most the engine's step size. */
  stepTokens?: number;
  /** Finished sequences kept in the pool for the next turn (default 16; 0 = free at once). */
  retainSequences?: number;
  /** Load a hit only when reading it is predicted to beat recomputing it (absent: always load). */
  fetchPolicy?: FetchOrRecompute;
  now?: () => number;
}

/**
 * Per-step token budget while several sequences are active. On a CPU a
 * bigger batch of prompt tokens is not computed faster per token, only
 * finished later: one cached turn's suffix per step gives the lowest TTFT.
 */
const DEFAULT_STEP_TOKENS = 128;
const AGING_STEPS = 4;
const IO_GRACE_MS = 3;
/** Under fetch-or-recompute, every this-many "recompute" decisions one loads anyway, so the read rate stays measured. */
const PROBE_EVERY = 16;
const RECOMPUTE_MARGIN = 2;
const DEFAULT_RETAINED = 16;
/** Cancels for ids this scheduler does not hold (they finished meanwhile): remembered this many at most. */
const MAX_UNMATCHED_CANCELS = 1024;

/** What the scheduler holds now, for admin stats and the tests that check abandoned work is dropped. */
export interface SchedulerState {
  waiting: number;
  running: number;
  /** Finished sequences kept in the pool for a next turn. */
  retained: number;
  /** Engine forwards run so far. */
  steps: number;
  pool: { freeBlocks: number; totalBlocks: number };
  /** Jobs ended so far, whatever ended them (done, error, cancel). */
  ended: number;
  /** Jobs ended by a cancel, and the most engine steps any of them ran after its cancel arrived. */
  cancels: { ended: number; maxStepsAfterCancel: number };
}

interface Fetched {
  payloads: Uint8Array[];
  /** A retained sequence to continue instead (its first `reusable` tokens are this prompt's). */
  retained: RetainedSequence | null;
  reusable: number;
}

interface Run {
  job: PrefillJob;
  order: number;
  state: 'fetching' | 'deferred' | 'prefill' | 'decode' | 'storing';
  sequence: EngineSequence | null;
  sampler: TokenSampler | null;
  /** Set at the first decode step when the job decodes speculatively. */
  speculative?: SpeculativeDecoder | null;
  namespace: unknown;
  /** Tokens whose KV is in the sequence: the prompt's computed part, then the reply as it is fed. */
  fedTokens: number[];
  /** Prompt tokens the sequence must hold before the first token is sampled. */
  promptTarget: number;
  generated: number[];
  storedUpToBlock: number;
  cachedTokens: number;
  recomputedHitTokens: number;
  /** Deferred: waits until `waitFor` has stored `waitBlocks` blocks (or is gone). */
  waitFor: Run | null;
  waitBlocks: number;
  skipped: number;
  startedAt: number;
  queueMs: number;
  lookupMs: number;
  loadMs: number;
  prefillStartedAt: number;
  prefillTokens: number;
  storageError?: string;
  cancelled: boolean;
}

export class PrefillScheduler {
  private readonly waiting: PrefillJob[] = [];
  /** Admitted and unfinished, in admission order. */
  private readonly runs: Run[] = [];
  private readonly cancelledIds = new Set<string>();
  /** Step count when each admitted job's cancel arrived (a cancel ends it at the next step at the latest). */
  private readonly cancelSeenAt = new Map<string, number>();
  private steps = 0;
  private cancelsEnded = 0;
  private jobsEnded = 0;
  private maxStepsAfterCancel = 0;
  private nextOrder = 0;
  private recomputeDecisions = 0;
  private loopActive = false;
  private closed = false;
  private readonly now: () => number;
  private readonly stepTokens: number;
  /** Stores in flight, so close() can wait for write-behind to settle. */
  private readonly pendingStores = new Set<Promise<unknown>>();
  private readonly pendingFetches = new Set<Promise<unknown>>();
  private readonly retained: RetainedSequences;

  constructor(private readonly options: SchedulerOptions) {
    this.now = options.now ?? (() => performance.now());
    this.retained = new RetainedSequences(options.retainSequences ?? DEFAULT_RETAINED);
    this.stepTokens = Math.max(1, Math.min(options.stepTokens ?? DEFAULT_STEP_TOKENS, options.engine.maxStepTokens));
  }

  get depth(): SchedulerState {
    const { engine } = this.options;
    return {
      waiting: this.waiting.length,
      running: this.runs.length,
      retained: this.retained.size,
      steps: this.steps,
      pool: { freeBlocks: engine.freeBlocks(), totalBlocks: engine.totalBlocks() },
      ended: this.jobsEnded,
      cancels: { ended: this.cancelsEnded, maxStepsAfterCancel: this.maxStepsAfterCancel },
    };
  }

  submit(job: PrefillJob): void {
    if (this.closed) {
      this.options.emit(job.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
      return;
    }
    this.waiting.push(job);
    this.kick();
  }

  cancel(jobId: string): void {
    const at = this.waiting.findIndex((j) => j.id === jobId);
    if (at !== -1) {
      const [job] = this.waiting.splice(at, 1);
      this.jobsEnded++;
      this.cancelsEnded++;
      this.emitCancelled(job);
      return;
    }
    const run = this.runs.find((r) => r.job.id === jobId);
    if (run) {
      run.cancelled = true;
      if (!this.cancelSeenAt.has(jobId)) this.cancelSeenAt.set(jobId, this.steps);
    } else {
      // Submit and cancel arrive in order on one port: an id held nowhere has finished (or was never sent here).
      // Kept bounded so cancels racing the end of their jobs cannot grow it forever.
      this.cancelledIds.add(jobId);
      if (this.cancelledIds.size > MAX_UNMATCHED_CANCELS) this.cancelledIds.delete(this.cancelledIds.values().next().value!);
    }
    this.kick();
  }

  /** Stops taking jobs, fails waiting ones, lets write-behind finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) {
      this.options.emit(job.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
    }
    for (const run of this.runs) run.cancelled = true;
    this.kick();
    while (this.loopActive || this.pendingFetches.size > 0) await new Promise((r) => setTimeout(r, 5));
    await Promise.allSettled([...this.pendingStores]);
    this.retained.clear();
  }

  /** Frees every retained sequence (a purge: their KV must not be continued). Sequences in use are not retained. */
  dropRetained(): void {
    this.retained.clear();
  }

  private kick(): void {
    if (this.loopActive) return;
    this.loopActive = true;
    setImmediate(() => void this.loop());
  }

  private async loop(): Promise<void> {
    try {
      for (;;) {
        // Before the step, not after: a job submitted meanwhile, and its lookup, then join this step instead of the next.
        for (let round = 0; round < 3; round++) {
          this.reapCancelled();
          this.admit();
          this.releaseDeferred();
          await this.yieldToIo();
          if (!this.admissible()) break;
        }
        if (!this.runs.some((r) => r.state === 'prefill' || r.state === 'decode')) {
          // A job submitted during the last yield: its kick found the loop running.
          if (this.admissible()) continue;
          break;
        }
        this.step();
      }
    } finally {
      this.loopActive = false;
    }
  }

  /**
   * Yield so submits, cancels and finished lookups are seen between steps.
   * A lookup or load is a few I/O round trips, each of which would otherwise
   * wait out a whole step: while some are in flight, give them a few ms.
   */
  private async yieldToIo(): Promise<void> {
    const deadline = this.now() + IO_GRACE_MS;
    do await new Promise((r) => setImmediate(r));
    while (this.pendingFetches.size > 0 && this.now() < deadline);
  }

  private admissible(): boolean {
    return this.waiting.length > 0 && this.runs.length < this.options.maxBatch && this.fitsInPool(this.waiting[0]);
  }

  private admit(): void {
    while (this.admissible()) {
      const job = this.waiting.shift()!;
      if (this.cancelledIds.delete(job.id)) {
        this.jobsEnded++;
        this.cancelsEnded++;
        this.emitCancelled(job);
        continue;
      }
      const run: Run = {
        job,
        order: this.nextOrder++,
        state: 'fetching',
        sequence: null,
        sampler: null,
        namespace: null,
        fedTokens: [],
        promptTarget: job.prefillOnly ? Math.floor(job.tokens.length / this.options.blockTokens) * this.options.blockTokens : job.tokens.length,
        generated: [],
        storedUpToBlock: 0,
        cachedTokens: 0,
        recomputedHitTokens: 0,
        waitFor: null,
        waitBlocks: 0,
        skipped: 0,
        startedAt: this.now(),
        queueMs: Math.max(0, Date.now() - job.submittedAt),
        lookupMs: 0,
        loadMs: 0,
        prefillStartedAt: 0,
        prefillTokens: 0,
        cancelled: false,
      };
      this.runs.push(run);
      this.fetch(run);
    }
  }

  /**
   * KV pool admission: a job starts only when its whole sequence (prompt +
   * max_tokens) fits next to the admitted ones, so a busy worker queues
   * requests instead of failing them. Alone, a job always starts (and gets
   * the engine's typed pool error if it cannot fit at all).
   */
  private fitsInPool(job: PrefillJob): boolean {
    const { engine, blockTokens } = this.options;
    const pages = (j: PrefillJob) => Math.ceil((j.tokens.length + j.sampling.maxTokens) / blockTokens);
    const stillToTake = this.runs.reduce((sum, run) => sum + pages(run.job) - (run.sequence ? Math.ceil(run.fedTokens.length / blockTokens) : 0), 0);
    // Retained sequences are a cache: their pages go before any request waits for room.
    while (engine.freeBlocks() - stillToTake < pages(job) && this.retained.evictOldest());
    return this.runs.length === 0 || engine.freeBlocks() - stillToTake >= pages(job);
  }

  private fetch(run: Run): void {
    run.state = 'fetching';
    const pending = this.lookupAndLoad(run)
      .then((fetched) => this.onFetched(run, fetched))
      .catch((error: unknown) => this.fail(run, error))
      .finally(() => {
        this.pendingFetches.delete(pending);
        this.kick();
      });
    this.pendingFetches.add(pending);
  }

  /**
   * Validates the job and finds its longest cached prefix: a retained
   * sequence of this tenant, or blocks from the tier, whichever covers more
   * (storage faults become a miss).
   */
  private async lookupAndLoad(run: Run): Promise<Fetched> {
    const { engine, blockTokens } = this.options;
    const { tokens, sampling } = run.job;
    if (tokens.length === 0) throw Object.assign(new Error('the prompt has no tokens'), { code: 'KVT_ERR_REQUEST_EMPTY_PROMPT' });
    if (tokens.length + sampling.maxTokens > engine.contextLength) {
      throw Object.assign(new Error(`prompt (${tokens.length} tokens) + max_tokens (${sampling.maxTokens}) exceeds the context length ${engine.contextLength}`), {
        code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW',
      });
    }
    // At least one token must be prefilled to get the logits of the next one.
    const taken = this.retained.take(run.job.tenantSalt, tokens, tokens.length - 1);
    // A retained sequence sharing less than a block (a BOS, a template header) is worth more kept for its own conversation.
    const retained = taken && taken.reusable >= blockTokens ? taken : null;
    if (taken && !retained) this.retained.put(taken.entry);
    const heldBlocks = retained ? Math.floor(retained.reusable / blockTokens) : 0;
    let fromTier: Uint8Array[]; // blocks [heldBlocks, …)
    try {
      fromTier = await this.lookupTier(run, retained?.reusable ?? 0, heldBlocks);
    } catch (error) {
      if (retained) this.retained.put(retained.entry);
      throw error;
    }
    if (!retained) return { payloads: fromTier, retained: null, reusable: 0 };
    if ((heldBlocks + fromTier.length) * blockTokens <= retained.reusable) return { payloads: [], retained: retained.entry, reusable: retained.reusable };
    // The tier holds blocks past the retained sequence (another worker stored them, e.g. a prefill/decode
    // split's prefill half): continue the sequence from its last whole block with those.
    return { payloads: fromTier, retained: retained.entry, reusable: heldBlocks * blockTokens };
  }

  /**
   * Tier blocks [fromBlock, …) of the prompt's prefix, unless `reusable`
   * tokens held in the pool already cover every block the tier could have.
   */
  private async lookupTier(run: Run, reusable: number, fromBlock: number): Promise<Uint8Array[]> {
    const { engine, cache, blockTokens } = this.options;
    const { tokens } = run.job;
    const maxCachedBlocks = Math.floor((tokens.length - 1) / blockTokens);
    if (!cache) return [];
    run.namespace = cache.namespace(engine.fingerprint, run.job.tenantSalt);
    if (reusable >= maxCachedBlocks * blockTokens) return [];
    try {
      const lookupStart = this.now();
      const hit = await cache.lookup(run.namespace, tokens, { tenant: run.job.tenant, trafficClass: run.job.trafficClass }, maxCachedBlocks);
      run.lookupMs += this.now() - lookupStart;
      if (hit.blocks <= fromBlock || !this.shouldLoad(hit.blocks - fromBlock, run)) return [];
      const loadStart = this.now();
      const loaded = await cache.load(hit, maxCachedBlocks, fromBlock);
      const loadMs = this.now() - loadStart;
      run.loadMs += loadMs;
      this.options.fetchPolicy?.observeLoad(loaded.payloads.length * cache.blockBytes, loadMs);
      return loaded.payloads;
    } catch (error) {
      run.storageError = describe(error);
      this.options.onStorageError?.('lookup', error);
      return [];
    }
  }

  private shouldLoad(blocks: number, run: Run): boolean {
    const policy = this.options.fetchPolicy;
    if (!policy) return true;
    const decision = policy.decide(blocks, this.options.cache!.blockBytes, this.options.blockTokens);
    // Recompute only on a clear margin: both rates are noisy, and a load also spares the pool's compute for other sequences.
    if (decision.loadBlocks > 0 || decision.predictedComputeMs * RECOMPUTE_MARGIN >= decision.predictedReadMs) return true;
    if (++this.recomputeDecisions % PROBE_EVERY === 0) return true;
    run.recomputedHitTokens = blocks * this.options.blockTokens;
    return false;
  }

  private onFetched(run: Run, fetched: Fetched): void {
    const { payloads, retained, reusable } = fetched;
    if (run.cancelled || this.closed) {
      if (retained) this.retained.put(retained);
      return this.finish(run, 'cancelled');
    }
    const { blockTokens } = this.options;
    const cachedTokens = (retained ? reusable : 0) + payloads.length * blockTokens;
    const blocker = this.sharedPrefixInFlight(run, Math.floor(cachedTokens / blockTokens));
    if (blocker) {
      if (retained) this.retained.put(retained);
      run.state = 'deferred';
      run.waitFor = blocker.run;
      run.waitBlocks = blocker.blocks;
      return;
    }
    try {
      if (retained) {
        run.sequence = retained.sequence;
        run.sequence.truncate(reusable);
      } else run.sequence = this.options.engine.createSequence();
      if (payloads.length > 0) run.sequence.importBlocks(payloads);
    } catch (error) {
      return this.fail(run, error);
    }
    run.cachedTokens = cachedTokens;
    run.fedTokens = run.job.tokens.slice(0, cachedTokens);
    // Blocks that came from the tier are stored; a retained sequence's own are stored up to what it handed off.
    run.storedUpToBlock = retained && payloads.length === 0 ? Math.min(retained.storedBlocks, Math.floor(reusable / blockTokens)) : cachedTokens / blockTokens;
    run.prefillStartedAt = this.now();
    run.state = 'prefill';
    if (run.fedTokens.length >= run.promptTarget) this.promptDone(run, null); // prefillOnly with everything cached
  }

  /** An earlier unfinished prompt that will store more of this one's prefix than the cache has now. */
  private sharedPrefixInFlight(run: Run, cachedBlocks: number): { run: Run; blocks: number } | null {
    if (!this.options.cache) return null;
    const { blockTokens } = this.options;
    const usable = Math.floor((run.job.tokens.length - 1) / blockTokens);
    let best: { run: Run; blocks: number } | null = null;
    for (const other of this.runs) {
      if (other.order >= run.order) break;
      if (other.state === 'decode' || other.job.tenantSalt !== run.job.tenantSalt) continue;
      const shared = Math.min(usable, commonFullBlocks(other.job.tokens, run.job.tokens, blockTokens));
      if (shared > cachedBlocks && other.storedUpToBlock < shared && (!best || shared > best.blocks)) best = { run: other, blocks: shared };
    }
    return best;
  }

  private releaseDeferred(): void {
    for (const run of this.runs) {
      if (run.state !== 'deferred') continue;
      const blocker = run.waitFor!;
      const gone = !this.runs.includes(blocker);
      if (gone || blocker.state === 'decode' || blocker.storedUpToBlock >= run.waitBlocks) {
        run.waitFor = null;
        this.fetch(run);
      }
    }
  }

  private reapCancelled(): void {
    for (const run of [...this.runs]) {
      run.cancelled ||= this.cancelledIds.delete(run.job.id);
      // A fetch in flight ends when it returns; a prefill-only job being stored ends when the write does.
      if (run.cancelled && (run.state === 'prefill' || run.state === 'decode' || run.state === 'deferred')) this.finish(run, 'cancelled');
    }
  }

  /** One engine forward: every decoding sequence's next token (and drafts) plus the chosen prefill chunks. */
  private step(): void {
    const decoding = this.runs.filter((r) => r.state === 'decode');
    const prefilling = this.runs.filter((r) => r.state === 'prefill');
    const items: { sequence: EngineSequence; tokens: number[]; logits: boolean | 'all' }[] = [];
    const owners: Array<{ run: Run; kind: 'decode' } | { run: Run; kind: 'spec' } | { run: Run; kind: 'prefill'; done: boolean }> = [];
    // Drafts take the rows and logit rows left after one row per decoding sequence and one logit row per prompt.
    let draftRows = Math.min(this.options.engine.maxStepTokens, this.options.engine.maxLogitRows ?? Infinity) - decoding.length - prefilling.length;
    let decodeRows = 0;
    const specBatch: { run: Run; decoder: SpeculativeDecoder; limit: number }[] = [];
    for (const run of decoding) {
      let spec: SpeculativeDecoder | null;
      try {
        spec = this.speculativeOf(run);
      } catch (error) {
        this.fail(run, error);
        continue;
      }
      if (spec) {
        const remaining = run.job.sampling.maxTokens - run.generated.length;
        // Invariant: a decoder's plan emits at most `limit` tokens (limit − 1 drafts). Rows are reserved at that
        // bound, so all decoders can be planned in one batch below and the step never exceeds the engine's rows.
        const limit = Math.max(1, Math.min(remaining, 1 + Math.max(0, draftRows)));
        draftRows -= limit - 1;
        specBatch.push({ run, decoder: spec, limit });
        continue;
      }
      decodeRows++;
      items.push({ sequence: run.sequence!, tokens: [run.generated[run.generated.length - 1]], logits: true });
      owners.push({ run, kind: 'decode' });
    }
    for (const { run, tokens } of this.planSpeculative(specBatch)) {
      decodeRows += tokens.length;
      items.push({ sequence: run.sequence!, tokens, logits: 'all' });
      owners.push({ run, kind: 'spec' });
    }
    const chunks = planPrefillChunks(
      prefilling.map((r) => ({ remaining: r.promptTarget - r.fedTokens.length, skipped: r.skipped, order: r.order })),
      // Alone, a prompt has nobody to interleave with: it takes the engine's whole chunk.
      { stepTokens: decoding.length + prefilling.length > 1 ? this.stepTokens : this.options.engine.maxStepTokens, maxRows: this.options.engine.maxStepTokens, agingSteps: AGING_STEPS, decodeRows },
    );
    prefilling.forEach((run, i) => {
      if (chunks[i] === 0) {
        run.skipped++;
        return;
      }
      run.skipped = 0;
      const from = run.fedTokens.length;
      const tokens = run.job.tokens.slice(from, from + chunks[i]);
      const done = from + chunks[i] >= run.promptTarget;
      items.push({ sequence: run.sequence!, tokens, logits: done && !run.job.prefillOnly });
      owners.push({ run, kind: 'prefill', done });
    });
    const stepStart = this.now();
    let results: (Float32Array | null)[];
    this.steps++;
    try {
      results = this.options.engine.step(items);
    } catch (error) {
      for (const { run } of owners) this.fail(run, error);
      return;
    }
    const prefillRows = items.reduce((sum, item, i) => sum + (owners[i].kind === 'prefill' ? item.tokens.length : 0), 0);
    if (prefillRows > 0) this.options.fetchPolicy?.observePrefill(prefillRows, this.now() - stepStart);
    owners.forEach((owner, i) => {
      const { run } = owner;
      for (const id of items[i].tokens) run.fedTokens.push(id);
      if (owner.kind === 'decode') return this.sampleNext(run, results[i]!);
      if (owner.kind === 'spec') return this.acceptSpeculative(run, items[i].tokens.length, results[i]!);
      run.prefillTokens += items[i].tokens.length;
      this.storeNewBlocks(run);
      if (owner.done) this.promptDone(run, results[i]);
    });
  }

  /** The prompt is in the sequence: report cache usage, then sample the first token (or, prefill-only, finish once stored). */
  private promptDone(run: Run, logits: Float32Array | null): void {
    const { cache, blockTokens } = this.options;
    const promptBlocks = Math.floor(run.job.tokens.length / blockTokens);
    this.options.emit(run.job.id, {
      type: 'prefilled',
      promptTokens: run.job.tokens.length,
      cachedTokens: run.cachedTokens,
      storedPromptTokens: cache ? Math.max(0, promptBlocks - Math.floor(run.cachedTokens / blockTokens)) * blockTokens : 0,
      queueMs: run.queueMs,
      lookupMs: run.lookupMs,
      loadMs: run.loadMs,
      prefillMs: this.now() - run.prefillStartedAt,
      ...(run.recomputedHitTokens > 0 ? { recomputedHitTokens: run.recomputedHitTokens } : {}),
      ...(run.storageError ? { storageError: run.storageError } : {}),
    });
    if (run.job.prefillOnly) {
      // Out of the step loop while the blocks are written through: the decode worker reads them next.
      run.state = 'storing';
      const stored = (cache ? cache.flush() : Promise.resolve())
        .catch((error: unknown) => this.options.onStorageError?.('store', error))
        .finally(() => {
          this.pendingStores.delete(stored);
          this.finish(run, 'length');
        });
      this.pendingStores.add(stored);
      return;
    }
    try {
      run.sampler = this.options.createSampler(run.job);
    } catch (error) {
      return this.fail(run, error);
    }
    run.state = 'decode';
    this.sampleNext(run, logits!);
  }

  /** Samples and accepts the next token; a sampler that throws (a grammar dead end) fails only its own job. */
  private sampleNext(run: Run, logits: Float32Array): void {
    let token: number;
    try {
      token = run.sampler!.sample(logits, run.fedTokens);
    } catch (error) {
      return this.fail(run, error);
    }
    this.accept(run, token);
  }

  /**
   * Verified drafts: the KV now holds the fed token and the accepted drafts
   * (fedTokens mirrors it), each emitted token goes through `accept` until
   * the job ends.
   */
  private acceptSpeculative(run: Run, fed: number, rows: Float32Array): void {
    let emitted: number[];
    try {
      emitted = run.speculative!.complete(rows);
    } catch (error) {
      return this.fail(run, error);
    }
    // step() pushed every fed token; only the first (the last sampled) and the accepted drafts stay in the KV.
    run.fedTokens.length -= fed - 1;
    for (let i = 0; i + 1 < emitted.length; i++) run.fedTokens.push(emitted[i]);
    for (const token of emitted) {
      this.accept(run, token);
      if (!this.runs.includes(run)) break;
    }
  }

  /**
   * The step's drafts, batched by `planSpeculative` when given. A batch that
   * throws is planned again one decoder at a time, so an error (a grammar dead
   * end, a full pool) fails only the job it belongs to.
   */
  private planSpeculative(batch: readonly { run: Run; decoder: SpeculativeDecoder; limit: number }[]): { run: Run; tokens: number[] }[] {
    if (batch.length === 0) return [];
    const together = this.options.planSpeculative;
    if (together) {
      try {
        const plans = together(batch);
        return batch.map(({ run }, i) => ({ run, tokens: plans[i].tokens }));
      } catch {
        // Re-planned alone below; the failing decoder throws again there and fails its own job.
      }
    }
    const planned: { run: Run; tokens: number[] }[] = [];
    for (const { run, decoder, limit } of batch) {
      try {
        planned.push({ run, tokens: decoder.plan(limit).tokens });
      } catch (error) {
        this.fail(run, error);
      }
    }
    return planned;
  }

  private speculativeOf(run: Run): SpeculativeDecoder | null {
    if (run.speculative === undefined) run.speculative = this.options.createSpeculative?.(run.job, run.sequence!, [...run.fedTokens, ...run.generated]) ?? null;
    return run.speculative;
  }

  /** A sampled token: emit it, and end the job on a stop token, max_tokens or cancel. */
  private accept(run: Run, token: number): void {
    const isStop = run.job.sampling.stopTokenIds.includes(token);
    run.generated.push(token);
    this.options.emit(run.job.id, { type: 'tokens', ids: [token] });
    if (isStop) this.finish(run, 'stop');
    else if (run.generated.length >= run.job.sampling.maxTokens) this.finish(run, 'length');
    else if (run.cancelled || this.cancelledIds.delete(run.job.id)) this.finish(run, 'cancelled');
  }

  private finish(run: Run, reason: 'stop' | 'length' | 'cancelled'): void {
    if (!this.remove(run)) return;
    this.options.emit(run.job.id, {
      type: 'done',
      finishReason: reason,
      completionTokens: run.generated.length,
      workerMs: this.now() - run.startedAt,
      decodeTokens: Math.max(0, run.generated.length - 1),
      prefillTokens: run.prefillTokens,
      ...(run.speculative ? { speculative: { proposed: run.speculative.stats.proposed, accepted: run.speculative.stats.accepted } } : {}),
    });
    run.speculative?.free();
    const sequence = run.sequence;
    if (!sequence) return;
    // After the answer is out: feed the last token when it completes a block, then store the reply's blocks.
    try {
      const { blockTokens } = this.options;
      const last = run.generated[run.generated.length - 1];
      if (reason !== 'cancelled' && last !== undefined && this.options.cache && (run.fedTokens.length + 1) % blockTokens === 0) {
        sequence.decode(last);
        run.fedTokens.push(last);
      }
      this.storeNewBlocks(run);
    } catch (error) {
      this.options.onStorageError?.('store', error);
    }
    // No-store: the request's KV is not kept past it, not even in the engine's pool of retained sequences.
    if (reason === 'cancelled' || this.closed || run.job.retention?.noStore) sequence.free();
    else this.retained.put({ sequence, tokens: run.fedTokens, tenantSalt: run.job.tenantSalt, storedBlocks: run.storedUpToBlock });
  }

  private fail(run: Run, error: unknown): void {
    if (!this.remove(run)) return;
    run.speculative?.free();
    run.sequence?.free();
    const coded = error as { code?: unknown };
    const code = typeof coded.code === 'string' && coded.code.startsWith('KVT_ERR_') ? coded.code : 'KVT_ERR_WORKER_FAILED';
    this.options.emit(run.job.id, { type: 'error', code, message: messageOf(error) });
  }

  /** Takes `run` out of the admitted set; false when it was already out. */
  private remove(run: Run): boolean {
    const at = this.runs.indexOf(run);
    if (at === -1) return false;
    this.runs.splice(at, 1);
    this.jobsEnded++;
    const seenAt = this.cancelSeenAt.get(run.job.id);
    if (seenAt !== undefined) {
      this.cancelSeenAt.delete(run.job.id);
      this.cancelsEnded++;
      this.maxStepsAfterCancel = Math.max(this.maxStepsAfterCancel, this.steps - seenAt);
    }
    return true;
  }

  private emitCancelled(job: PrefillJob): void {
    this.options.emit(job.id, { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 });
  }

  /** Hands every full block of `fedTokens` not yet stored to the cache (write-behind; errors are counted, never thrown). */
  private storeNewBlocks(run: Run): void {
    const { cache, blockTokens } = this.options;
    if (!cache || !run.sequence) return;
    const fullBlocks = Math.floor(run.fedTokens.length / blockTokens);
    if (fullBlocks <= run.storedUpToBlock) return;
    const fromBlock = run.storedUpToBlock;
    run.storedUpToBlock = fullBlocks;
    try {
      const payloads = run.sequence.exportBlocks(fromBlock, fullBlocks);
      const pending = cache
        .store({
          namespace: run.namespace,
          tokens: run.fedTokens.slice(0, fullBlocks * blockTokens),
          fromBlock,
          payloads,
          tenant: run.job.tenant,
          trafficClass: run.job.trafficClass,
          ...(run.job.retention ? { retention: run.job.retention } : {}),
        })
        .catch((error: unknown) => this.options.onStorageError?.('store', error));
      this.pendingStores.add(pending);
      void pending.finally(() => this.pendingStores.delete(pending));
    } catch (error) {
      this.options.onStorageError?.('store', error);
    }
  }
}

function describe(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}

function messageOf(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}
