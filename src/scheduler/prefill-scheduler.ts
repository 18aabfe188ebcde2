/**
 * The prefill worker's loop, on the thread that owns the engine.
 *
 *   submit ─▶ waiting ─▶ fetching ───────────────▶ prefill ─────────────▶ decode ─▶ done
 *                        lookup longest cached      chunks of the uncached   one row per step
 *                        prefix, load (or not:      rest, shortest first     until stop / max_tokens
 *                        fetch-or-recompute),       (step-plan.ts); full
 *                        import into a sequence     blocks stored per chunk
 *                        (fetch-phase.ts)           (engine-step.ts,         (decode-phase.ts)
 *                              │ ▲                   store-writer.ts)
 *                              ▼ │ blocks of the shared prefix stored
 *                           deferred (single-flight.ts)
 *
 * A request is one record from admission to retention, RequestSequence
 * (sequence.ts); this file is the loop over its phases, each phase a module
 * of its own that reads and writes that record. How a request leaves is
 * request-end.ts; cancels and end counts are job-ends.ts.
 *
 * Every step is one engine forward carrying all decoding sequences' next
 * tokens and the chosen prefill chunks together, so replies keep streaming
 * while prompts are computed, and a cached turn's short suffix is not stuck
 * behind another session's cold prompt. Lookups and loads are I/O and run
 * between steps.
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
import { BlockFlights } from '../kvtier/index.ts';
import { DecodePhase } from './decode-phase.ts';
import { DEFAULT_STEP_TOKENS, EngineStep } from './engine-step.ts';
import { FetchPhase } from './fetch-phase.ts';
import type { RequestSpec } from './job.ts';
import { JobEnds } from './job-ends.ts';
import { RequestEnd } from './request-end.ts';
import { RetainedSequences } from './retained-sequences.ts';
import type { FinishReason, SchedulerContext, SchedulerOptions } from './scheduler-context.ts';
import { RequestSequence } from './sequence.ts';
import { ComputingBlocks, releasable } from './single-flight.ts';
import { StoreWriter } from './store-writer.ts';

export type { SchedulerOptions } from './scheduler-context.ts';

const IO_GRACE_MS = 3;
const DEFAULT_RETAINED = 16;

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

export class PrefillScheduler implements SchedulerContext {
  readonly now: () => number;
  readonly active: RequestSequence[] = [];
  readonly retained: RetainedSequences;
  readonly computing: ComputingBlocks;
  readonly ends = new JobEnds();
  readonly pendingFetches = new Set<Promise<unknown>>();
  readonly pendingStores = new Set<Promise<unknown>>();
  private isClosed = false;
  private stepCount = 0;
  private readonly waiting: RequestSpec[] = [];
  private nextOrder = 0;
  private loopActive = false;
  private readonly fetchPhase: FetchPhase;
  private readonly decodePhase: DecodePhase;
  private readonly ending: RequestEnd;
  private readonly engineStep: EngineStep;

  constructor(readonly options: SchedulerOptions) {
    this.now = options.now ?? (() => performance.now());
    this.retained = new RetainedSequences(options.retainSequences ?? DEFAULT_RETAINED);
    this.computing = new ComputingBlocks(options.cache?.flights ?? new BlockFlights());
    const stepTokens = Math.max(1, Math.min(options.stepTokens ?? DEFAULT_STEP_TOKENS, options.engine.maxStepTokens));
    const store = new StoreWriter(this);
    this.fetchPhase = new FetchPhase(this);
    this.decodePhase = new DecodePhase(this);
    this.ending = new RequestEnd(this, store);
    this.engineStep = new EngineStep(this, stepTokens, this.decodePhase, store, () => this.stepCount++);
  }

  get closed(): boolean {
    return this.isClosed;
  }

  /** Engine forwards run so far. */
  get steps(): number {
    return this.stepCount;
  }

  get depth(): SchedulerState {
    const { engine } = this.options;
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

  submit(job: RequestSpec): void {
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
      this.ending.cancelledUnstarted(job);
      return;
    }
    const seq = this.active.find((s) => s.job.id === jobId);
    if (seq) {
      seq.cancelled = true;
      this.ends.cancelHeld(jobId, this.steps);
    } else this.ends.cancelUnmatched(jobId);
    this.kick();
  }

  /** Stops taking jobs, fails waiting ones, lets write-behind finish. */
  async close(): Promise<void> {
    this.isClosed = true;
    for (const job of this.waiting.splice(0)) {
      this.options.emit(job.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
    }
    for (const seq of this.active) seq.cancelled = true;
    this.kick();
    while (this.loopActive || this.pendingFetches.size > 0) await new Promise((r) => setTimeout(r, 5));
    await Promise.allSettled([...this.pendingStores]);
    this.retained.clear();
  }

  /** Frees every retained sequence (a purge: their KV must not be continued). Sequences in use are not retained. */
  dropRetained(): void {
    this.retained.clear();
  }

  kick(): void {
    if (this.loopActive) return;
    this.loopActive = true;
    setImmediate(() => void this.loop());
  }

  promptDone(seq: RequestSequence, logits: Float32Array | null): void {
    this.decodePhase.promptDone(seq, logits);
  }

  finish(seq: RequestSequence, reason: FinishReason): void {
    this.ending.finish(seq, reason);
  }

  fail(seq: RequestSequence, error: unknown): void {
    this.ending.fail(seq, error);
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
        if (!this.active.some((s) => s.phase === 'prefill' || s.phase === 'decode')) {
          // A job submitted during the last yield: its kick found the loop running.
          if (this.admissible()) continue;
          break;
        }
        this.engineStep.run();
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
    return this.waiting.length > 0 && this.active.length < this.options.maxBatch && this.fitsInPool(this.waiting[0]);
  }

  private admit(): void {
    while (this.admissible()) {
      const job = this.waiting.shift()!;
      if (this.ends.takeUnmatched(job.id)) {
        this.ending.cancelledUnstarted(job);
        continue;
      }
      const seq = new RequestSequence(job, this.nextOrder++, this.options.blockTokens, this.now());
      this.active.push(seq);
      this.fetchPhase.start(seq);
    }
  }

  /**
   * KV pool admission: a job starts only when its whole sequence (prompt +
   * max_tokens) fits next to the admitted ones, so a busy worker queues
   * requests instead of failing them. Alone, a job always starts (and gets
   * the engine's typed pool error if it cannot fit at all).
   */
  private fitsInPool(job: RequestSpec): boolean {
    const { engine, blockTokens } = this.options;
    const pages = Math.ceil((job.tokens.length + job.sampling.maxTokens) / blockTokens);
    const stillToTake = this.active.reduce((sum, seq) => sum + seq.pagesStillToTake(blockTokens), 0);
    // Retained sequences are a cache: their pages go before any request waits for room.
    while (engine.freeBlocks() - stillToTake < pages && this.retained.evictOldest());
    return this.active.length === 0 || engine.freeBlocks() - stillToTake >= pages;
  }

  /** Deferred requests whose blocker stored the shared blocks (or is gone) look up again. */
  private releaseDeferred(): void {
    for (const seq of this.active) {
      if (seq.phase !== 'deferred' || !releasable(seq, this.active)) continue;
      seq.waitFor = null;
      this.fetchPhase.start(seq);
    }
  }

  private reapCancelled(): void {
    for (const seq of [...this.active]) {
      seq.cancelled ||= this.ends.takeUnmatched(seq.job.id);
      // A fetch in flight ends when it returns; a prefill-only job being stored ends when the write does.
      if (seq.cancelled && (seq.phase === 'prefill' || seq.phase === 'decode' || seq.phase === 'deferred')) this.finish(seq, 'cancelled');
    }
  }
}
