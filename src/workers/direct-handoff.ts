/**
 * The direct hand-off: a job bound for the shared queue goes to an idle
 * worker through one Redis list instead of BullMQ's scripts (an add, a marker
 * wake-up, a fetch, a finish: ~1 ms of Redis and two process wake-ups per job,
 * bench/RESULTS.md "e2e overhead"). A worker blocked on the list receives the
 * job itself in the pop's reply.
 *
 *   API ── LPUSH kvtier:{handoff}:jobs <QueuedJob JSON> ──▶ Redis ──BRPOP──▶ an idle worker
 *   worker ── ZADD kvtier:{handoff}:takers <lease end> <worker id>   (renewed while it takes hand-offs)
 *          ── ZADD kvtier:{handoff}:leases <lease end> <worker id>   (renewed while it lives)
 *
 * Who keeps a hand-off from being lost is the API, which waits on the request
 * anyway (bullmq-watchdog.ts):
 *   not started within the routed wait → LREM; removed: nobody took it → BullMQ's shared queue
 *                                         not removed: a worker popped it; no `started` within
 *                                         another routed wait (it died in between) → shared queue
 *   started, its worker's lease lapsed on two checks → shared queue (a re-run, as a stalled job's)
 * A job popped by two means (moved, yet its first worker lived) runs twice; the API's relay already
 * merges overlapping runs (bullmq-pending.ts), as it does for a BullMQ job whose lock lapsed.
 *
 * The keys share one hash tag: one slot on a Redis Cluster.
 */
import type { RedisClient as Redis } from '../kvtier/index.ts';

/** The hand-offs waiting for a worker, newest first (LPUSH / BRPOP). */
export const HANDOFF_JOBS_KEY = 'kvtier:{handoff}:jobs';
/** Workers that take hand-offs now: member worker id, score = when that lapses (ms). */
export const HANDOFF_TAKERS_KEY = 'kvtier:{handoff}:takers';
/** Workers alive with hand-offs to finish (a closing one stops taking, not living): the same form. */
export const HANDOFF_LEASES_KEY = 'kvtier:{handoff}:leases';
/** The queue name a hand-off's `started` message and the API's record carry (no BullMQ queue has it). */
export const DIRECT_QUEUE = 'kvtier-direct';

/** How long the API trusts its count of live takers before reading it again. */
const TAKERS_READ_MS = 1000;

/** The API side: whether to hand off, the push, and taking a hand-off back. */
export class DirectHandoff {
  private takers = { at: 0, live: false };
  private reading: Promise<boolean> | null = null;

  constructor(
    private readonly redis: Redis,
    private readonly log: (level: 'info' | 'warn' | 'error', message: string) => void,
  ) {}

  /**
   * Whether some worker takes hand-offs now (read at most once a second). No taker, or a fault
   * reading it: the job goes to BullMQ, where a worker that comes up later still finds it.
   */
  async available(now = Date.now()): Promise<boolean> {
    if (now - this.takers.at < TAKERS_READ_MS) return this.takers.live;
    this.reading ??= this.redis
      .zcount(HANDOFF_TAKERS_KEY, now, '+inf')
      .then(
        (count) => count > 0,
        (error: Error) => {
          this.log('warn', `reading the direct hand-off's takers failed (${error.message}); jobs go to the shared queue`);
          return false;
        },
      )
      .then((live) => {
        this.takers = { at: now, live };
        this.reading = null;
        return live;
      });
    return this.reading;
  }

  /** Forget the count: a hand-off was not taken in time (its taker may be gone). */
  distrust(): void {
    this.takers = { at: 0, live: false };
  }

  push(payload: string): Promise<number> {
    return this.redis.lpush(HANDOFF_JOBS_KEY, payload);
  }

  /** True: the hand-off was still waiting and is removed (nobody will run it); false: a worker took it. */
  async takeBack(payload: string): Promise<boolean> {
    return (await this.redis.lrem(HANDOFF_JOBS_KEY, 1, payload)) === 1;
  }

  /** The workers whose lease is current (one read for all the hand-offs being watched). */
  async liveLeases(now = Date.now()): Promise<Set<string>> {
    return new Set(await this.redis.zrangebyscore(HANDOFF_LEASES_KEY, now, '+inf'));
  }
}
