/**
 * A cluster-wide lease in Redis: at most one holder at a time, across every
 * node that sees the same Redis.
 *
 *   acquire:  SET key <value> NX PX ttl          value = {"owner","token","since"}
 *   renew:    every ttl/3, Lua: if GET key == value then PEXPIRE key ttl
 *   release:  Lua: if GET key == value then DEL key       (compare-and-delete)
 *
 * The token makes renew and release safe after a lapse: a holder that stalled
 * past its TTL (GC pause, partition) cannot extend or delete the lease a second
 * node took meanwhile. When a renewal finds the lease gone or someone else's,
 * the lease's `signal` aborts, so the work it guards stops at its next check
 * (GcOptions.signal stops GC between batches). A holder that dies simply stops
 * renewing: the key expires after at most `ttlMs` and the next node acquires.
 */
import { randomUUID } from 'node:crypto';

import type { RedisClient as Redis } from '../kvtier/index.ts';

import { ClusterError } from './errors.ts';

const RENEW_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('PEXPIRE', KEYS[1], ARGV[2]) else return 0 end`;
const RELEASE_LUA = `if redis.call('GET', KEYS[1]) == ARGV[1] then return redis.call('DEL', KEYS[1]) else return 0 end`;

export interface LeaderLockOptions {
  /** Lease lifetime without renewal; a dead holder blocks others this long at most. Default 15 s. */
  ttlMs?: number;
  /** Who holds it, as others will see it in "skipped: held by …" (e.g. worker id). */
  owner: string;
}

export interface LeaseHolder {
  owner: string;
  since: number;
}

export interface LeaderLease {
  readonly key: string;
  readonly owner: string;
  /** Aborts when a renewal finds the lease lost (expired and taken, or deleted). */
  readonly signal: AbortSignal;
  /** Stops renewing and deletes the key if it is still ours; false when it was not. */
  release(): Promise<boolean>;
}

export type AcquireResult = { acquired: true; lease: LeaderLease } | { acquired: false; heldBy: LeaseHolder | null };

export class RedisLeaderLock {
  private readonly ttlMs: number;

  constructor(
    private readonly redis: Redis,
    readonly key: string,
    private readonly options: LeaderLockOptions,
  ) {
    this.ttlMs = options.ttlMs ?? 15_000;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 300) {
      throw new ClusterError('BAD_OPTION', `leader lock ttlMs must be a whole number of ms ≥ 300, got ${options.ttlMs}`, { param: 'ttlMs' });
    }
    if (!options.owner) throw new ClusterError('BAD_OPTION', 'leader lock needs an owner name (e.g. the worker id)', { param: 'owner' });
  }

  /** The current holder, or null when the lease is free. */
  async holder(): Promise<LeaseHolder | null> {
    return parseHolder(await this.redis.get(this.key));
  }

  async tryAcquire(): Promise<AcquireResult> {
    const value = JSON.stringify({ owner: this.options.owner, token: randomUUID(), since: Date.now() });
    const set = await this.redis.set(this.key, value, 'PX', this.ttlMs, 'NX');
    if (set !== 'OK') return { acquired: false, heldBy: await this.holder() };
    return { acquired: true, lease: this.startLease(value) };
  }

  private startLease(value: string): LeaderLease {
    const controller = new AbortController();
    const lose = (reason: string, cause?: unknown): void => {
      clearInterval(timer);
      if (!controller.signal.aborted) controller.abort(new ClusterError('LOCK_LOST', `lease ${this.key} lost: ${reason}`, { cause }));
    };
    const timer = setInterval(() => {
      this.redis
        .eval(RENEW_LUA, 1, this.key, value, String(this.ttlMs))
        .then((renewed) => {
          if (Number(renewed) !== 1) lose('it expired or another node holds it now');
        })
        .catch((error: unknown) => lose(`renewal failed: ${(error as Error).message}`, error));
    }, Math.max(100, Math.floor(this.ttlMs / 3)));
    timer.unref();
    const key = this.key;
    const redis = this.redis;
    return {
      key,
      owner: this.options.owner,
      signal: controller.signal,
      async release(): Promise<boolean> {
        clearInterval(timer);
        return Number(await redis.eval(RELEASE_LUA, 1, key, value)) === 1;
      },
    };
  }
}

function parseHolder(raw: string | null): LeaseHolder | null {
  if (raw === null) return null;
  try {
    const parsed = JSON.parse(raw) as { owner?: unknown; since?: unknown };
    return { owner: String(parsed.owner), since: Number(parsed.since) };
  } catch {
    // Not ours (someone SET the key by hand): still a holder, of unknown name.
    return { owner: `unknown (${raw.slice(0, 40)})`, since: Number.NaN };
  }
}
