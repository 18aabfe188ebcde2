/**
 * The prefill worker's loop, on the thread that owns the engine.
 *
 *   admit (one job at a time)                      decode (all running jobs together)
 *   ───────────────────────────                    ───────────────────────────────────
 *   lookup longest cached prefix ─▶ load blocks    one decodeBatch step over every
 *   ─▶ importBlocks ─▶ prefill the uncached rest   running sequence, then yield to
 *   ─▶ store new full prompt blocks (write-behind) the event loop (new jobs, cancels)
 *   ─▶ sample the first token
 *
 * Single flight: admissions are serial, and a job's prompt blocks are handed
 * to the cache (whose hot tier holds them at once) before the next job is
 * looked up, so concurrent requests sharing an uncached prefix compute it
 * once per worker: the second one hits the first one's blocks.
 *
 * At the end of a reply the last sampled token is fed too when that
 * completes a block, and the reply's full blocks are stored: the next turn of
 * the conversation (prompt + reply + …) hits them.
 *
 * Storage faults never fail a job: lookup/load errors become a miss (full
 * prefill), store errors are counted; both are reported to `onStorageError`.
 */
import type { JobEvent, PrefillJob } from './job.ts';
import type { CacheTier, EngineModel, EngineSequence, TokenSampler } from './ports.ts';

export interface SchedulerOptions {
  engine: EngineModel;
  cache: CacheTier | null;
  blockTokens: number;
  maxBatch: number;
  emit: (jobId: string, event: JobEvent) => void;
  createSampler: (job: PrefillJob) => TokenSampler;
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  now?: () => number;
}

interface RunningJob {
  job: PrefillJob;
  sequence: EngineSequence;
  sampler: TokenSampler;
  /** Tokens sampled so far (the last one not yet fed to the engine). */
  generated: number[];
  /** Tokens whose KV is in the sequence: prompt + generated fed so far. */
  fedTokens: number[];
  storedUpToBlock: number;
  namespace: unknown;
  startedAt: number;
  engineMs: number;
  prefillTokens: number;
  cancelled: boolean;
}

export class PrefillScheduler {
  private readonly waiting: PrefillJob[] = [];
  private readonly running: RunningJob[] = [];
  private readonly cancelledIds = new Set<string>();
  private loopActive = false;
  private closed = false;
  private readonly now: () => number;
  /** Stores in flight, so close() can wait for write-behind to settle. */
  private readonly pendingStores = new Set<Promise<unknown>>();

  constructor(private readonly options: SchedulerOptions) {
    this.now = options.now ?? (() => performance.now());
  }

  get depth(): { waiting: number; running: number } {
    return { waiting: this.waiting.length, running: this.running.length };
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
      this.options.emit(job.id, { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 });
      return;
    }
    const running = this.running.find((r) => r.job.id === jobId);
    if (running) running.cancelled = true;
    else this.cancelledIds.add(jobId);
  }

  /** Stops taking jobs, fails waiting ones, lets write-behind finish. */
  async close(): Promise<void> {
    this.closed = true;
    for (const job of this.waiting.splice(0)) {
      this.options.emit(job.id, { type: 'error', code: 'KVT_ERR_SERVER_SHUTTING_DOWN', message: 'the worker is stopping; retry the request' });
    }
    for (const run of this.running) run.cancelled = true;
    while (this.loopActive) await new Promise((r) => setTimeout(r, 5));
    await Promise.allSettled([...this.pendingStores]);
  }

  private kick(): void {
    if (this.loopActive) return;
    this.loopActive = true;
    setImmediate(() => void this.loop());
  }

  private async loop(): Promise<void> {
    try {
      while (this.waiting.length > 0 || this.running.length > 0) {
        if (this.waiting.length > 0 && this.running.length < this.options.maxBatch && this.fitsInPool(this.waiting[0])) {
          const job = this.waiting.shift()!;
          await this.admit(job);
        }
        this.decodeStep();
        // Yield so submits and cancels (messages) are seen between steps.
        await new Promise((r) => setImmediate(r));
      }
    } finally {
      this.loopActive = false;
      if (!this.closed && (this.waiting.length > 0 || this.running.length > 0)) this.kick();
    }
  }

  /**
   * KV pool admission: a job starts only when its whole sequence (prompt +
   * max_tokens) fits next to the running ones, so a busy worker queues
   * requests instead of failing them. Alone, a job always starts (and gets
   * the engine's typed pool error if it cannot fit at all).
   */
  private fitsInPool(job: PrefillJob): boolean {
    if (this.running.length === 0) return true;
    const { engine, blockTokens } = this.options;
    const needed = Math.ceil((job.tokens.length + job.sampling.maxTokens) / blockTokens);
    const reservedByRunning = this.running.reduce(
      (sum, run) => sum + Math.ceil((run.job.tokens.length + run.job.sampling.maxTokens) / blockTokens) - Math.ceil(run.fedTokens.length / blockTokens),
      0,
    );
    return engine.freeBlocks() - reservedByRunning >= needed;
  }

  private async admit(job: PrefillJob): Promise<void> {
    const { engine, cache, blockTokens } = this.options;
    const startedAt = this.now();
    const queueMs = Math.max(0, Date.now() - job.submittedAt);
    if (this.cancelledIds.delete(job.id)) {
      this.options.emit(job.id, { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 });
      return;
    }
    let sequence: EngineSequence | null = null;
    try {
      const tokens = job.tokens;
      if (tokens.length === 0) throw Object.assign(new Error('the prompt has no tokens'), { code: 'KVT_ERR_REQUEST_EMPTY_PROMPT' });
      if (tokens.length + job.sampling.maxTokens > engine.contextLength) {
        throw Object.assign(new Error(`prompt (${tokens.length} tokens) + max_tokens (${job.sampling.maxTokens}) exceeds the context length ${engine.contextLength}`), {
          code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW',
        });
      }
      // At least one token must be prefilled to get the logits of the next one.
      const maxCachedBlocks = Math.floor((tokens.length - 1) / blockTokens);
      let namespace: unknown = null;
      let cachedBlocks = 0;
      let payloads: Uint8Array[] = [];
      let lookupMs = 0;
      let loadMs = 0;
      let storageError: string | undefined;
      if (cache) {
        namespace = cache.namespace(engine.fingerprint, job.tenantSalt);
        const lookupStart = this.now();
        try {
          const hit = await cache.lookup(namespace, tokens, { tenant: job.tenant, trafficClass: job.trafficClass }, maxCachedBlocks);
          lookupMs = this.now() - lookupStart;
          if (hit.blocks > 0) {
            const loadStart = this.now();
            const loaded = await cache.load(hit, maxCachedBlocks);
            loadMs = this.now() - loadStart;
            payloads = loaded.payloads;
            cachedBlocks = loaded.payloads.length;
          }
        } catch (error) {
          storageError = describe(error);
          this.options.onStorageError?.('lookup', error);
          payloads = [];
          cachedBlocks = 0;
        }
      }
      const prefillStart = this.now();
      sequence = engine.createSequence();
      if (cachedBlocks > 0) sequence.importBlocks(payloads);
      const cachedTokens = cachedBlocks * blockTokens;
      const logits = sequence.prefill(tokens.slice(cachedTokens));
      const prefillMs = this.now() - prefillStart;
      const run: RunningJob = {
        job,
        sequence,
        sampler: this.options.createSampler(job),
        generated: [],
        fedTokens: [...tokens],
        storedUpToBlock: cachedBlocks,
        namespace,
        startedAt,
        engineMs: 0,
        prefillTokens: tokens.length - cachedTokens,
        cancelled: false,
      };
      const promptBlocks = Math.floor(tokens.length / blockTokens);
      const storedPromptTokens = cache ? (promptBlocks - cachedBlocks) * blockTokens : 0;
      this.storeNewBlocks(run);
      this.options.emit(job.id, {
        type: 'prefilled',
        promptTokens: tokens.length,
        cachedTokens,
        storedPromptTokens,
        queueMs,
        lookupMs,
        loadMs,
        prefillMs,
        ...(storageError ? { storageError } : {}),
      });
      const first = run.sampler.sample(logits, run.fedTokens);
      sequence = null; // owned by `run` from here on
      this.running.push(run);
      this.accept(run, first);
    } catch (error) {
      sequence?.free();
      const coded = error as { code?: unknown };
      const code = typeof coded.code === 'string' && coded.code.startsWith('KVT_ERR_') ? coded.code : 'KVT_ERR_WORKER_FAILED';
      this.options.emit(job.id, { type: 'error', code, message: messageOf(error) });
    }
  }

  /** A sampled token: emit it, and end the job on a stop token, max_tokens or cancel. */
  private accept(run: RunningJob, token: number): void {
    const isStop = run.job.sampling.stopTokenIds.includes(token);
    run.generated.push(token);
    this.options.emit(run.job.id, { type: 'tokens', ids: [token] });
    if (isStop) this.finish(run, 'stop');
    else if (run.generated.length >= run.job.sampling.maxTokens) this.finish(run, 'length');
    else if (run.cancelled || this.cancelledIds.delete(run.job.id)) this.finish(run, 'cancelled');
  }

  private decodeStep(): void {
    const active = this.running.filter((r) => !r.cancelled);
    for (const run of this.running.filter((r) => r.cancelled)) this.finish(run, 'cancelled');
    if (active.length === 0) return;
    const tokens = active.map((r) => r.generated[r.generated.length - 1]);
    let allLogits: Float32Array[];
    try {
      allLogits = this.options.engine.decodeBatch(
        active.map((r) => r.sequence),
        tokens,
      );
    } catch (error) {
      for (const run of active) this.fail(run, error);
      return;
    }
    active.forEach((run, i) => {
      run.fedTokens.push(tokens[i]);
      const next = run.sampler.sample(allLogits[i], run.fedTokens);
      this.accept(run, next);
    });
  }

  private finish(run: RunningJob, reason: 'stop' | 'length' | 'cancelled'): void {
    const at = this.running.indexOf(run);
    if (at !== -1) this.running.splice(at, 1);
    const workerMs = this.now() - run.startedAt;
    this.options.emit(run.job.id, {
      type: 'done',
      finishReason: reason,
      completionTokens: run.generated.length,
      workerMs,
      decodeTokens: Math.max(0, run.generated.length - 1),
      prefillTokens: run.prefillTokens,
    });
    // After the answer is out: feed the last token when it completes a block, then store the reply's blocks.
    try {
      const { blockTokens } = this.options;
      const last = run.generated[run.generated.length - 1];
      if (reason !== 'cancelled' && last !== undefined && this.options.cache && (run.fedTokens.length + 1) % blockTokens === 0) {
        run.sequence.decode(last);
        run.fedTokens.push(last);
      }
      this.storeNewBlocks(run);
    } catch (error) {
      this.options.onStorageError?.('store', error);
    } finally {
      run.sequence.free();
    }
  }

  private fail(run: RunningJob, error: unknown): void {
    const at = this.running.indexOf(run);
    if (at !== -1) this.running.splice(at, 1);
    run.sequence.free();
    const coded = error as { code?: unknown };
    const code = typeof coded.code === 'string' && coded.code.startsWith('KVT_ERR_') ? coded.code : 'KVT_ERR_WORKER_FAILED';
    this.options.emit(run.job.id, { type: 'error', code, message: messageOf(error) });
  }

  /** Hands every full block of `fedTokens` not yet stored to the cache (write-behind; errors are counted, never thrown). */
  private storeNewBlocks(run: RunningJob): void {
    const { cache, blockTokens } = this.options;
    if (!cache) return;
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
