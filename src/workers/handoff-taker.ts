/**
 * `kvtier worker`'s side of the direct hand-off (direct-handoff.ts): while it
 * has room for another job it blocks on the hand-off list, and it keeps its
 * lease current, which is how the API tells a live taker from a dead one.
 *
 *   loop: room? ──no──▶ wait for a job to end
 *          │yes
 *          ▼
 *        BRPOP kvtier:{handoff}:jobs (its own blocking connection) ──▶ run(job), not awaited
 *
 * A pop answered while the connection closes loses that job here; the API
 * finds it not started and moves it to the shared queue.
 */
import { describeError } from '../errors.ts';
import { createRedisClient, type RedisClient as Redis } from '../kvtier/index.ts';
import { HANDOFF_JOBS_KEY, HANDOFF_LEASES_KEY, HANDOFF_TAKERS_KEY } from './direct-handoff.ts';
import type { QueuedJob } from './bullmq-protocol.ts';

/** Pause before popping again after a Redis error. */
const POP_RETRY_MS = 1000;

export interface HandoffTakerOptions {
  redisUrl: string;
  redisOptions: Record<string, unknown>;
  workerId: string;
  /** Sends the lease renewals (the blocking connection cannot while it waits). */
  publisher: Redis;
  /** The lease's length; renewed every third of it. */
  leaseMs: number;
  /** Whether this worker has room for one more job now. */
  hasRoom(): boolean;
  /** Runs one job to its end (its events go on its reply channel). */
  run(job: QueuedJob): Promise<unknown>;
  log: (level: 'info' | 'warn' | 'error', message: string) => void;
}

export class HandoffTaker {
  private readonly blocking: Redis;
  private leaseTimer: NodeJS.Timeout | null = null;
  private readonly running = new Set<Promise<unknown>>();
  private closing = false;
  private wake: (() => void) | null = null;
  private loop: Promise<void> = Promise.resolve();

  constructor(private readonly options: HandoffTakerOptions) {
    this.blocking = createRedisClient(options.redisUrl, options.redisOptions);
    this.blocking.on('error', (error: Error) => options.log('warn', `redis (hand-offs): ${error.message}`));
  }

  /** Takes hand-offs from now on (the lease is written first and renewed from then on, so the API sends none before). */
  async start(): Promise<void> {
    await this.renew(true);
    this.leaseTimer = setInterval(() => void this.renew(), Math.max(100, Math.floor(this.options.leaseMs / 3)));
    this.leaseTimer.unref();
    this.loop = this.take();
  }

  /** A job ended or started elsewhere: wake the loop if it waits for room. */
  roomChanged(): void {
    const wake = this.wake;
    this.wake = null;
    wake?.();
  }

  /** Renews the lease (and, unless closing, the taking); drops lapsed ones of dead workers. */
  private async renew(mustSucceed = false): Promise<void> {
    const now = Date.now();
    const until = now + this.options.leaseMs;
    const multi = this.options.publisher.multi().zadd(HANDOFF_LEASES_KEY, until, this.options.workerId).zremrangebyscore(HANDOFF_LEASES_KEY, '-inf', now);
    if (!this.closing) multi.zadd(HANDOFF_TAKERS_KEY, until, this.options.workerId).zremrangebyscore(HANDOFF_TAKERS_KEY, '-inf', now);
    try {
      await multi.exec();
    } catch (error) {
      if (mustSucceed) throw error;
      this.options.log('warn', `renewing the hand-off lease failed (the API may move this worker's jobs elsewhere): ${describeError(error).message}`);
    }
  }

  private async take(): Promise<void> {
    while (!this.closing) {
      if (!this.options.hasRoom()) {
        await new Promise<void>((resolve) => (this.wake = resolve));
        continue;
      }
      let popped: [string, string] | null;
      try {
        popped = await this.blocking.brpop(HANDOFF_JOBS_KEY, 0);
      } catch (error) {
        if (this.closing) return;
        this.options.log('warn', `taking a hand-off failed (retried in ${POP_RETRY_MS} ms): ${describeError(error).message}`);
        await new Promise((resolve) => setTimeout(resolve, POP_RETRY_MS));
        continue;
      }
      if (!popped) continue;
      let job: QueuedJob;
      try {
        job = JSON.parse(popped[1]);
      } catch {
        this.options.log('warn', 'an unreadable hand-off was dropped');
        continue;
      }
      const run = this.options.run(job).catch((error: unknown) => this.options.log('warn', `hand-off ${job.id} failed: ${describeError(error).message}`));
      this.running.add(run);
      void run.finally(() => this.running.delete(run));
    }
  }

  /**
   * Takes no more hand-offs (withdrawn first, so the API stops sending them), waits for the jobs
   * it took to end while its lease stays current, then withdraws the lease.
   */
  async close(): Promise<void> {
    this.closing = true;
    const withdrawn = (what: string) => (error: Error) => this.options.log('warn', `withdrawing the hand-off ${what} failed (it lapses by itself): ${error.message}`);
    await this.options.publisher.zrem(HANDOFF_TAKERS_KEY, this.options.workerId).catch(withdrawn('taking'));
    this.roomChanged();
    this.blocking.disconnect();
    await this.loop;
    await Promise.allSettled([...this.running]);
    if (this.leaseTimer !== null) clearInterval(this.leaseTimer);
    // The taking again too: a renewal that was under way when closing began may have written it back.
    await this.options.publisher.multi().zrem(HANDOFF_LEASES_KEY, this.options.workerId).zrem(HANDOFF_TAKERS_KEY, this.options.workerId).exec().catch(withdrawn('lease'));
  }
}
