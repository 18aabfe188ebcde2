/**
 * The API side's watch over the jobs it waits on: one routed off the shared
 * queue (a worker's own queue, a split half's role queue) whose worker died
 * or never takes it must not strand it, and one that failed with no worker
 * left to say so (stalled twice) must end its request. See bullmq-runner.ts
 * for the whole flow.
 */
import type { Queue } from 'bullmq';
import type { RedisClient as Redis } from '../kvtier/index.ts';

import type { Config } from '../config.ts';
import { describeError, KvtError } from '../errors.ts';
import { failureCode, QUEUE_NAME, type QueuedJob } from './bullmq-protocol.ts';
import type { PendingJob } from './bullmq-pending.ts';
import { DIRECT_QUEUE, type DirectHandoff } from './direct-handoff.ts';

const WATCHDOG_MS = 250;
/** A job added this long before a Redis fault may still have been lost by it (replication lag, acknowledged but unreplicated). */
const LOST_ADD_MS = 5000;
/**
 * A job waited on this long is looked for in its queue's failed set, then again every as long. A job
 * fails there without a word to this process only when BullMQ's stalled check gives it up (its
 * workers died twice, which takes two stall intervals), or a worker died between taking it and
 * reporting a failure; every other failure comes as the job's error event at once. So a failure
 * is seen within about a second, without this process reading every job's event stream (the
 * QueueEvents it used before woke it several times per job, on the path of every request).
 */
const FAILED_CHECK_MS = 1000;

export interface WatchdogDeps {
  config: Config;
  connection: Redis;
  /** The jobs this process waits on, by id (the runner's own map). */
  pending: Map<string, PendingJob>;
  queueFor(name: string): Queue;
  /** The direct hand-off, when on (its jobs are watched here too). */
  handoff: DirectHandoff | null;
  add(queueName: string, queued: QueuedJob): Promise<unknown>;
  /** Ends the job's request (with `error`). */
  settle(jobId: string, error: KvtError): void;
  /** When this process last saw a Redis connection fault (0: never). */
  lastRedisFaultAt(): number;
  log: (level: 'info' | 'warn' | 'error', message: string) => void;
}

export class RoutedJobWatchdog {
  private readonly timer: NodeJS.Timeout;
  /** The fault each waiting shared-queue job was last looked for after: once per fault, not every tick. */
  private readonly checkedAfter = new WeakMap<PendingJob, number>();

  constructor(private readonly deps: WatchdogDeps) {
    this.timer = setInterval(() => void this.watch(), WATCHDOG_MS);
    this.timer.unref();
  }

  stop(): void {
    clearInterval(this.timer);
  }

  /**
   * Jobs off the shared queue must not be stranded by a worker that died or
   * never takes them. Every WATCHDOG_MS, for each such job:
   *   not started, waiting ≥ ROUTED_WAIT_MS  → remove there (fails if a worker just locked it) → shared queue
   *   started on a worker's own queue, its lock gone on two checks in a row (the worker died)
   *                                          → remove → shared queue (re-run from the start, as a stall)
   * BullMQ's own stalled check covers the role queues (their workers run it).
   * And on the shared queue, after a Redis fault (a failover: replication is
   * asynchronous, so a job added just before the primary died may never have
   * reached its replica):
   *   not started, waiting ≥ ROUTED_WAIT_MS, its hash gone → added again (looked for once per fault)
   */
  private async watch(): Promise<void> {
    const routedWaitMs = Math.min(2000, Math.max(WATCHDOG_MS, Math.floor(this.deps.config.queueWaitTimeoutMs / 4)));
    const now = Date.now();
    const faultAt = this.deps.lastRedisFaultAt();
    // The failed-set lookups of every job due one, sent together (one round trip, however many long jobs run).
    // A hand-off has no failed set: its taker's error event says it, and a dead taker's lease lapses.
    const due = [...this.deps.pending].filter(([, p]) => !p.moving && p.queued && p.queueName !== DIRECT_QUEUE && now - p.addedAt >= FAILED_CHECK_MS && now - p.failCheckedAt >= FAILED_CHECK_MS);
    for (const [, pending] of due) pending.failCheckedAt = now;
    await Promise.all(due.map(([jobId, pending]) => this.endIfFailed(jobId, pending)));
    const liveLeases = await this.liveLeases(now);
    for (const [jobId, pending] of this.deps.pending) {
      if (pending.moving || !pending.queued) continue;
      if (pending.queueName === DIRECT_QUEUE) {
        await this.watchHandoff(jobId, pending, now, routedWaitMs, liveLeases);
        continue;
      }
      if (pending.queueName === QUEUE_NAME) {
        // A fault since shortly before it was added: only then can a failover have lost it (one EXISTS).
        if (!pending.started && faultAt > pending.addedAt - LOST_ADD_MS && now - pending.addedAt >= routedWaitMs && this.checkedAfter.get(pending) !== faultAt) {
          this.checkedAfter.set(pending, faultAt);
          await this.addIfLost(jobId, pending);
        }
        continue;
      }
      const own = pending.queueName.startsWith(`${QUEUE_NAME}-w-`);
      try {
        if (!pending.started) {
          if (now - pending.addedAt >= routedWaitMs) await this.moveToShared(jobId, pending, `not taken within ${routedWaitMs} ms`);
        } else if (own) {
          const queue = this.deps.queueFor(pending.queueName);
          const locked = (await this.deps.connection.exists(queue.toKey(`${jobId}:lock`))) === 1;
          pending.lockMisses = locked ? 0 : pending.lockMisses + 1;
          if (pending.lockMisses >= 2 && (await queue.getJobState(jobId)) === 'active') await this.moveToShared(jobId, pending, 'its worker stopped renewing the job lock');
        }
      } catch (error) {
        this.deps.log('warn', `watching job ${jobId} on ${pending.queueName} failed: ${describeError(error).message}`);
      }
    }
  }

  /**
   * A direct hand-off (direct-handoff.ts) must not be stranded either:
   *   not started, waiting ≥ routedWaitMs → taken back → shared queue;
   *                                         already taken: its taker gets another routedWaitMs to say `started`
   *                                         (it died between the pop and the word) → shared queue
   *   started, its taker's lease lapsed on two checks in a row → shared queue (a re-run)
   */
  private async watchHandoff(jobId: string, pending: PendingJob, now: number, routedWaitMs: number, liveLeases: ReadonlySet<string> | null): Promise<void> {
    const handoff = this.deps.handoff!;
    try {
      if (!pending.started) {
        if (now - pending.addedAt < routedWaitMs) return;
        if (pending.takenAt === 0) {
          if (await handoff.takeBack(pending.handoff!)) return await this.handoffToShared(jobId, pending, `no worker took the hand-off within ${routedWaitMs} ms`);
          pending.takenAt = now;
        } else if (now - pending.takenAt >= routedWaitMs) {
          await this.handoffToShared(jobId, pending, `the worker that took it said nothing within ${routedWaitMs} ms`);
        }
        return;
      }
      if (liveLeases === null) return; // the leases could not be read: no judgement this tick
      const alive = pending.workerId !== null && liveLeases.has(pending.workerId);
      pending.lockMisses = alive ? 0 : pending.lockMisses + 1;
      if (pending.lockMisses >= 2) await this.handoffToShared(jobId, pending, `its worker ${pending.workerId}'s hand-off lease lapsed`);
    } catch (error) {
      this.deps.log('warn', `watching the hand-off of job ${jobId} failed: ${describeError(error).message}`);
    }
  }

  /** The workers with a current lease, read once per tick when a started hand-off is watched (null: none is, or the read failed). */
  private async liveLeases(now: number): Promise<Set<string> | null> {
    const handoff = this.deps.handoff;
    if (!handoff || ![...this.deps.pending.values()].some((p) => p.queueName === DIRECT_QUEUE && p.started && !p.moving)) return null;
    try {
      return await handoff.liveLeases(now);
    } catch (error) {
      this.deps.log('warn', `reading the hand-off leases failed: ${describeError(error).message}`);
      return null;
    }
  }

  private async handoffToShared(jobId: string, pending: PendingJob, why: string): Promise<void> {
    if (this.deps.pending.get(jobId) !== pending) return;
    pending.moving = true;
    try {
      Object.assign(pending, { queueName: QUEUE_NAME, handoff: null, takenAt: 0, lockMisses: 0, addedAt: Date.now() });
      // Its takers may be gone: the next jobs ask Redis again before handing off.
      this.deps.handoff!.distrust();
      await this.deps.add(QUEUE_NAME, pending.queued!);
      this.deps.log('warn', `job ${jobId} moved from the direct hand-off to the shared queue: ${why}`);
    } finally {
      pending.moving = false;
    }
  }

  /** A job in its queue's failed set: its request ends with the failure's code. */
  private async endIfFailed(jobId: string, pending: PendingJob): Promise<void> {
    const queue = this.deps.queueFor(pending.queueName);
    try {
      if ((await this.deps.connection.zscore(queue.toKey('failed'), jobId)) === null) return;
      const reason = (await queue.getJob(jobId))?.failedReason ?? 'failed';
      if (this.deps.pending.get(jobId) === pending) this.deps.settle(jobId, new KvtError(failureCode(reason), `the job failed on its worker: ${reason}`));
    } catch (error) {
      this.deps.log('warn', `looking for job ${jobId} among the failed jobs of ${pending.queueName} failed: ${describeError(error).message}`);
    }
  }

  private async addIfLost(jobId: string, pending: PendingJob): Promise<void> {
    const queue = this.deps.queueFor(QUEUE_NAME);
    try {
      if ((await this.deps.connection.exists(queue.toKey(jobId))) === 1 || this.deps.pending.get(jobId) !== pending || pending.started) return;
      pending.addedAt = Date.now();
      await this.deps.add(QUEUE_NAME, pending.queued!);
      this.deps.log('warn', `job ${jobId} was not on the shared queue after a Redis fault (lost in a failover); added again`);
    } catch (error) {
      this.deps.log('warn', `checking job ${jobId} on the shared queue failed: ${describeError(error).message}`);
    }
  }

  private async moveToShared(jobId: string, pending: PendingJob, why: string): Promise<void> {
    pending.moving = true;
    try {
      const from = pending.queueName;
      // 1 = removed; 0 = a worker holds its lock (it started after all): leave it there.
      if ((await this.deps.queueFor(from).remove(jobId)) !== 1) return;
      if (this.deps.pending.get(jobId) !== pending) return;
      pending.queueName = QUEUE_NAME;
      pending.lockMisses = 0;
      await this.deps.add(QUEUE_NAME, pending.queued!);
      this.deps.log('warn', `job ${jobId} moved from ${from} to the shared queue: ${why}`);
    } finally {
      pending.moving = false;
    }
  }
}
