/**
 * The worker's loop, on the thread that owns the engine, in nano-vllm's
 * shape: schedule() returns a plan, the engine runs it, postprocess() moves
 * each sequence on. Fetches and prefill-only flushes are I/O: they run
 * between steps and come back to the loop as events, which postprocess()
 * handles too, so a sequence changes status in one place (postprocess.ts).
 *
 *   submit ─▶ waiting ─ admit ─▶ beginFetch ─ fetchPrefix (fetch.ts, I/O) ─ event ─┐
 *                                                                                 ▼
 *   loop:  events ─▶ postprocess.onEvent ─▶ Deferred | Prefill | Fetching again | end
 *          schedule (schedule.ts) ─▶ engine.step ─▶ postprocess (sample, store blocks, finish)
 *
 * A request is one record, RequestSequence (sequence.ts). Each step is one
 * engine forward carrying every decoding sequence's next tokens and the
 * chosen prefill chunks together (continuous batching).
 *
 * Single flight: a job whose first uncached prompt block (by its chained
 * key, hashed once at admission) an earlier admitted, unfinished prompt is
 * computing waits until that prompt has stored those blocks, then looks up
 * again (and hits them: the tier holds handed-off blocks at once); a lookup
 * that was in flight while they were handed over looks again once. So
 * concurrent requests sharing an uncached prefix compute it once per worker.
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
import { BlockFlights } from '../kvtier/index.ts';
import { assertSpecFits, fetchPrefix, keyPrompt, type FetchDeps } from './fetch.ts';
import type { JobEvent, RequestSpec } from './job.ts';
import { JobEnds } from './job-ends.ts';
import { fitsInPool } from './pool-admission.ts';
import type { CacheTier, DecoderFactory, EngineModel } from './ports.ts';
import type { Io, LoopEvent } from './loop-state.ts';
import { beginFetch, cancelledUnstarted, fail, failAll, onEvent, postprocess, reapCancelled, releaseDeferred } from './postprocess.ts';
import { RetainedSequences } from './retained-sequences.ts';
import { DEFAULT_STEP_TOKENS, schedule } from './schedule.ts';
import { RequestSequence, SequenceStatus } from './sequence.ts';
import { ComputingBlocks, releasable } from './single-flight.ts';
import type { UnitPolicy } from './units.ts';

const IO_GRACE_MS = 3;
const DEFAULT_RETAINED = 16;

export interface SchedulerOptions {
  engine: EngineModel;
  cache: CacheTier | null;
  blockTokens: number;
  maxBatch: number;
  emit: (jobId: string, event: JobEvent) => void;
  /** Makes each request's decoder (sampler, grammar, speculative session): engine-decoders.ts on the engine thread. */
  decoders: DecoderFactory;
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  /** Tokens one step carries (decode rows + prefill chunks); default 128, at most the engine's step size. */
  stepTokens?: number;
  /** Finished sequences kept in the pool for the next turn (default 16; 0 = free at once). */
  retainSequences?: number;
  /** Load a hit only when reading it is predicted to beat recomputing it (absent: always load). */
  fetchPolicy?: FetchOrRecompute;
  now?: () => number;
  /** Prefix units (units.ts) for a model whose state is not its blocks; with it, no block hits are used. */
  units?: UnitPolicy | null;
}

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

/** The loop; its public fields are the state postprocess.ts reads and changes (LoopState, loop-state.ts). */
export class PrefillScheduler {
  readonly engine: EngineModel;
  readonly cache: CacheTier | null;
  readonly blockTokens: number;
  readonly decoders: DecoderFactory;
  readonly emit: (jobId: string, event: JobEvent) => void;
  readonly onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  readonly now: () => number;
  /** Unit mode (units.ts): prefix units instead of block hits, for a model whose state is not its blocks. */
  readonly units: UnitPolicy | null;
  /** Admitted and unfinished, in admission order. */
  readonly active: RequestSequence[] = [];
  readonly retained: RetainedSequences;
  readonly computing: ComputingBlocks;
  readonly ends = new JobEnds();
  readonly pendingStores = new Set<Promise<unknown>>();
  closed = false;
  /** Engine forwards run so far. */
  steps = 0;
  private readonly pendingFetches = new Set<Promise<unknown>>();
  private readonly events: LoopEvent[] = [];
  private readonly waiting: RequestSpec[] = [];
  private readonly fetchDeps: FetchDeps;
  private readonly stepTokens: number;
  private nextOrder = 0;
  private loopActive = false;

  constructor(private readonly options: SchedulerOptions) {
    ({ engine: this.engine, cache: this.cache, blockTokens: this.blockTokens, decoders: this.decoders, emit: this.emit, onStorageError: this.onStorageError } = options);
    this.now = options.now ?? (() => performance.now());
    this.units = options.cache ? (options.units ?? null) : null;
    this.retained = new RetainedSequences(options.retainSequences ?? DEFAULT_RETAINED);
    this.computing = new ComputingBlocks(options.cache?.flights ?? new BlockFlights());
    this.stepTokens = Math.max(1, Math.min(options.stepTokens ?? DEFAULT_STEP_TOKENS, options.engine.maxStepTokens));
    const { engine, cache, blockTokens, fetchPolicy, onStorageError } = options;
    this.fetchDeps = { engine, cache, blockTokens, retained: this.retained, fetchPolicy, onStorageError, now: this.now, recomputeDecisions: { count: 0 }, units: this.units };
  }

  get depth(): SchedulerState {
    const { engine } = this;
    return {
      waiting: this.waiting.length,
      running: this.active.length,
      retained: this.retained.size,
      steps: this.steps,
      pool: { freeBlocks: engine.freeBlocks(), totalBlocks: engine.totalBlocks() },
      ended: this.ends.ended,
      cancels: { ended: this.ends.cancelsEnded, maxStepsAfterCancel: this.ends.maxStepsAfterCancel },
    };
  }

  submit(spec: RequestSpec): void {
    if (this.closed) return this.emit(spec.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
    this.waiting.push(spec);
    this.kick();
  }

  cancel(jobId: string): void {
    const at = this.waiting.findIndex((j) => j.id === jobId);
    if (at !== -1) return cancelledUnstarted(this, this.waiting.splice(at, 1)[0]);
    const seq = this.active.find((s) => s.id === jobId);
    if (seq) {
      seq.cancelled = true;
      this.ends.cancelHeld(jobId, this.steps);
    } else this.ends.cancelUnmatched(jobId);
    this.kick();
  }

  /** Stops taking jobs, fails waiting ones, lets write-behind finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const spec of this.waiting.splice(0)) this.emit(spec.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
    for (const seq of this.active) seq.cancelled = true;
    this.kick();
    while (this.loopActive || this.pendingFetches.size > 0 || this.events.length > 0) await new Promise((r) => setTimeout(r, 5));
    await Promise.allSettled([...this.pendingStores]);
    this.drainEvents(); // a prefill-only write that landed just now ends its job before close returns
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
          this.drainEvents();
          reapCancelled(this);
          this.admit();
          this.start({ fetch: [], flush: [] }, (io) => releaseDeferred(this, (seq) => releasable(seq, this.active), io));
          await this.yieldToIo();
          this.drainEvents();
          if (!this.admissible()) break;
        }
        if (!this.active.some((s) => s.status === SequenceStatus.Prefill || s.status === SequenceStatus.Decode)) {
          // A job submitted (or a fetch done) during the last yield: its kick found the loop running.
          if (this.admissible() || this.events.length > 0) continue;
          break;
        }
        this.step();
      }
    } finally {
      this.loopActive = false;
      this.engine.idle?.();
    }
  }

  /** One engine forward: schedule, run, postprocess. */
  private step(): void {
    const plan = schedule(this.active, this.engine, this.stepTokens, this.decoders);
    failAll(this, plan.failed);
    const stepStart = this.now();
    this.steps++;
    let results: (Float32Array | null)[];
    try {
      results = this.engine.step(plan.items);
    } catch (error) {
      return failAll(this, plan.rows.map(({ seq }) => ({ seq, error })));
    }
    const prefillRows = plan.items.reduce((sum, item, i) => sum + (plan.rows[i].kind === 'prefill' ? item.tokens.length : 0), 0);
    if (prefillRows > 0) this.options.fetchPolicy?.observePrefill(prefillRows, this.now() - stepStart);
    this.start({ fetch: [], flush: [] }, (io) => postprocess(this, plan, results, io));
  }

  /** Events from I/O that completed, each handed to postprocess. */
  private drainEvents(): void {
    while (this.events.length > 0) {
      const event = this.events.shift()!;
      this.start({ fetch: [], flush: [] }, (io) => onEvent(this, event, io));
    }
  }

  /** Runs a postprocess call, then starts the I/O it asked for; completions come back as events. */
  private start(io: Io, call: (io: Io) => void): void {
    call(io);
    for (const seq of io.fetch) this.fetch(seq);
    for (const seq of io.flush) this.flush(seq);
  }

  private fetch(seq: RequestSequence): void {
    beginFetch(this, seq);
    // Keyed once, synchronously from admission, so claims follow admission order.
    if (keyPrompt(seq, this.fetchDeps)) this.computing.claim(seq, this.blockTokens);
    const pending = fetchPrefix(seq, this.fetchDeps).then(
      () => this.events.push({ type: 'fetched', seq }),
      (error: unknown) => this.events.push({ type: 'fetchFailed', seq, error }),
    );
    this.pendingFetches.add(pending);
    void pending.finally(() => {
      this.pendingFetches.delete(pending);
      this.kick();
    });
  }

  /** A prefill-only job's blocks written through: the decode worker reads them next. */
  private flush(seq: RequestSequence): void {
    const { cache, onStorageError } = this;
    const stored = (cache ? cache.flush() : Promise.resolve())
      .catch((error: unknown) => onStorageError?.('store', error))
      .finally(() => {
        this.pendingStores.delete(stored);
        this.events.push({ type: 'stored', seq });
        this.kick();
      });
    this.pendingStores.add(stored);
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
    return this.waiting.length > 0 && this.active.length < this.options.maxBatch && fitsInPool(this.waiting[0], this);
  }

  private admit(): void {
    while (this.admissible()) {
      const spec = this.waiting.shift()!;
      if (this.ends.takeUnmatched(spec.id)) {
        cancelledUnstarted(this, spec);
        continue;
      }
      const seq = new RequestSequence(spec, this.nextOrder++, this.blockTokens, this.now(), this.units !== null);
      this.active.push(seq);
      try {
        assertSpecFits(seq, this.engine.contextLength);
      } catch (error) {
        fail(this, seq, error);
        continue;
      }
      this.fetch(seq);
    }
  }
}
