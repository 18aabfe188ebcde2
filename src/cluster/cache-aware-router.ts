/**
 * Cache-aware dispatch (the idea of NVIDIA Dynamo's and llm-d's KV-aware
 * routers): send a request to the worker whose hot cache already covers the
 * longest prefix of it, unless that worker is overloaded.
 *
 *   route keys   r_0 = H(scope), r_i = H(r_{i-1} ‖ tokens of block i)      (chained like block keys)
 *   worker w     ZSET kvtier:{hot}:<w>  member r_i, score = last use (ms)    trimmed to maxKeys, PEXPIRE ttl
 *   live set     ZSET kvtier:{hot}:workers  member w, score = last announce  (older than ttl = gone)
 *   roles        ZSET kvtier:{hot}:role:<role>  the same, per worker role (both | prefill | decode)
 *   running      HASH kvtier:{hot}:running  w → jobs running there now (the worker reports each change)
 *   route(req)   for each live worker: ZMSCORE its set with r_0..r_n → covered = leading non-null run
 *                drop workers with queued ≥ maxQueued (load cap), pick the longest cover,
 *                ties → fewer queued; no cover at all → null (use the shared queue)
 *
 * Route keys are not the tier's block keys (those live in the engine thread);
 * they are a cheap chained SHA-256 of the same token blocks, so API and
 * worker compute the same ones from the job's tokens. A stale entry only
 * costs a routing miss: the worker then loads from shared storage like any
 * other, never serves a wrong block. Needs Redis ≥ 6.2 (ZMSCORE).
 */
import { createHash } from 'node:crypto';

import type { RedisClient as Redis } from '../kvtier/index.ts';

import { ClusterError } from './errors.ts';

/** Keys per ZADD call when a worker announces a prompt's blocks. */
const ANNOUNCE_SLICE = 512;
// One hash tag for every routing key: an announcement is one MULTI over the worker's set, the live
// set, its role set and the running counts, so on a Redis Cluster they live in one slot by design.
const HOT_PREFIX = 'kvtier:{hot}:';
export const HOT_WORKERS_KEY = 'kvtier:{hot}:workers';
const ROLE_PREFIX = 'kvtier:{hot}:role:';
const RUNNING_KEY = 'kvtier:{hot}:running';

/** What a worker does: whole jobs (colocated), or one half of a prefill/decode split. */
export type WorkerRole = 'both' | 'prefill' | 'decode';
export const WORKER_ROLES: readonly WorkerRole[] = ['both', 'prefill', 'decode'];

/** One 16-byte hex key per full block of `tokens`, chained from `scope` (model + tenant salt). */
export function routeKeys(scope: string, tokens: Uint32Array, blockTokens: number): string[] {
  if (!Number.isInteger(blockTokens) || blockTokens < 1) throw new ClusterError('BAD_OPTION', `blockTokens must be a whole number ≥ 1, got ${blockTokens}`, { param: 'blockTokens' });
  const keys: string[] = [];
  let previous = createHash('sha256').update(scope).digest().subarray(0, 16);
  const bytes = Buffer.from(tokens.buffer, tokens.byteOffset, tokens.byteLength);
  for (let b = 0; (b + 1) * blockTokens <= tokens.length; b++) {
    previous = createHash('sha256')
      .update(previous)
      .update(bytes.subarray(b * blockTokens * 4, (b + 1) * blockTokens * 4))
      .digest()
      .subarray(0, 16);
    keys.push(previous.toString('hex'));
  }
  return keys;
}

export interface HotSetOptions {
  /** A worker's announcement lives this long (ms) without renewal. Default 60 s. */
  ttlMs?: number;
  /** Route keys kept per worker (most recent); default 65536. */
  maxKeys?: number;
}

export interface RouteChoice {
  workerId: string;
  coveredBlocks: number;
}

export class CacheAwareRouter {
  private readonly ttlMs: number;
  private readonly maxKeys: number;

  constructor(
    private readonly redis: Redis,
    options: HotSetOptions = {},
  ) {
    this.ttlMs = options.ttlMs ?? 60_000;
    this.maxKeys = options.maxKeys ?? 65_536;
    if (!Number.isInteger(this.ttlMs) || this.ttlMs < 100) throw new ClusterError('BAD_OPTION', `ttlMs must be a whole number ≥ 100, got ${options.ttlMs}`, { param: 'ttlMs' });
    if (!Number.isInteger(this.maxKeys) || this.maxKeys < 1) throw new ClusterError('BAD_OPTION', `maxKeys must be a whole number ≥ 1, got ${options.maxKeys}`, { param: 'maxKeys' });
  }

  /**
   * A worker finished (or stored) a prompt: its blocks are hot there now.
   * With no keys it is a heartbeat: the worker stays live (and keeps its set).
   * `maxKeys` (default: the router's) is the worker's own RAM budget in blocks.
   */
  async announce(workerId: string, keys: readonly string[], now = Date.now(), role: WorkerRole = 'both', maxKeys = this.maxKeys): Promise<void> {
    const set = HOT_PREFIX + workerId;
    const multi = this.redis.multi();
    // In slices: a prompt's keys never become one call's arguments (a long prompt would overflow the stack).
    for (let i = 0; i < keys.length; i += ANNOUNCE_SLICE) multi.zadd(set, ...keys.slice(i, i + ANNOUNCE_SLICE).flatMap((key) => [now, key]));
    multi.zremrangebyrank(set, 0, -Math.max(1, Math.floor(maxKeys)) - 1);
    multi.pexpire(set, this.ttlMs);
    multi.zadd(HOT_WORKERS_KEY, now, workerId);
    multi.zremrangebyscore(HOT_WORKERS_KEY, '-inf', now - this.ttlMs);
    multi.zadd(ROLE_PREFIX + role, now, workerId);
    multi.zremrangebyscore(ROLE_PREFIX + role, '-inf', now - this.ttlMs);
    await multi.exec();
  }

  /** The worker leaves (clean shutdown): stop routing to it at once. */
  async withdraw(workerId: string): Promise<void> {
    const multi = this.redis.multi().del(HOT_PREFIX + workerId).zrem(HOT_WORKERS_KEY, workerId).hdel(RUNNING_KEY, workerId);
    for (const role of WORKER_ROLES) multi.zrem(ROLE_PREFIX + role, workerId);
    await multi.exec();
  }

  /** The worker now runs `jobs` jobs (routing balances on it). */
  async reportRunning(workerId: string, jobs: number): Promise<void> {
    await this.redis.hset(RUNNING_KEY, workerId, jobs);
  }

  /** Workers that announced within the ttl; with `role`, only those of that role. */
  async liveWorkers(now = Date.now(), role?: WorkerRole): Promise<string[]> {
    return this.redis.zrangebyscore(role ? ROLE_PREFIX + role : HOT_WORKERS_KEY, now - this.ttlMs, '+inf');
  }

  /** How many live workers each role has (one round trip). */
  async liveRoles(now = Date.now()): Promise<Record<WorkerRole, number>> {
    const pipeline = this.redis.pipeline();
    for (const role of WORKER_ROLES) pipeline.zcount(ROLE_PREFIX + role, now - this.ttlMs, '+inf');
    const replies = (await pipeline.exec()) ?? [];
    const counts = { both: 0, prefill: 0, decode: 0 };
    WORKER_ROLES.forEach((role, i) => {
      const [error, count] = replies[i] ?? [new Error('no reply'), 0];
      if (error) throw new ClusterError('REDIS', `reading the live ${role} workers failed: ${error.message}`, { cause: error });
      counts[role] = Number(count);
    });
    return counts;
  }

  /**
   * Leading blocks of `keys` each live worker (of `role`, if given) holds hot.
   * The prefix ends at the first block a worker lacks: later ones are useless
   * without it.
   */
  async coverage(keys: readonly string[], now = Date.now(), role?: WorkerRole): Promise<Map<string, number>> {
    return (await this.coverageAndRunning(keys, now, role)).covered;
  }

  /** coverage(), and each live worker's running jobs, in one round trip after the live set. */
  private async coverageAndRunning(keys: readonly string[], now: number, role?: WorkerRole): Promise<{ covered: Map<string, number>; running: Map<string, number> }> {
    const workers = await this.liveWorkers(now, role);
    const covered = new Map<string, number>();
    const running = new Map<string, number>();
    if (workers.length === 0) return { covered, running };
    const pipeline = this.redis.pipeline();
    pipeline.hmget(RUNNING_KEY, ...workers);
    if (keys.length > 0) for (const w of workers) pipeline.zmscore(HOT_PREFIX + w, keys as string[]);
    const [runningReply, ...replies] = (await pipeline.exec()) ?? [];
    const [runningError, counts] = runningReply ?? [new Error('no reply'), null];
    if (runningError) throw new ClusterError('REDIS', `reading the running jobs failed: ${runningError.message}`, { cause: runningError });
    workers.forEach((w, i) => running.set(w, Number((counts as (string | null)[])[i] ?? 0)));
    if (keys.length === 0) {
      for (const w of workers) covered.set(w, 0);
      return { covered, running };
    }
    workers.forEach((w, i) => {
      const [error, scores] = replies[i] ?? [new Error('no reply'), null];
      if (error) throw new ClusterError('REDIS', `reading the hot set of ${w} failed: ${error.message}`, { cause: error });
      let n = 0;
      for (const score of scores as (string | null)[]) {
        if (score === null) break;
        n++;
      }
      covered.set(w, n);
    });
    return { covered, running };
  }

  /**
   * The worker to send a request to, or null for the shared queue. `queued`
   * is each worker's current backlog; a worker at `maxQueued` or more loses
   * its preference so a hot worker cannot starve the others.
   */
  async route(keys: readonly string[], queued: ReadonlyMap<string, number>, maxQueued: number, now = Date.now()): Promise<RouteChoice | null> {
    return pickWorker(await this.coverage(keys, now), queued, maxQueued);
  }

  /**
   * The routing the API uses: among live workers (of `role`, if given), a
   * worker's load is the jobs running there (reported by the worker) plus
   * those waiting on its own queue (`waitingOf`, the caller's probe). A
   * worker is a candidate while it has fewer than `maxQueued` waiting and its
   * load is within `slack` of the least loaded worker's: a hot RAM tier saves
   * a storage read, which is worth less than waiting behind other prompts
   * while a worker sits idle. The longest cover among candidates wins (ties →
   * less load); no cover → null (the shared queue: the first free worker).
   */
  async routeAmong(
    keys: readonly string[],
    options: { role?: WorkerRole; maxQueued: number; slack: number; waitingOf: (workerIds: string[]) => Promise<ReadonlyMap<string, number>>; now?: number },
  ): Promise<RouteChoice | null> {
    const { covered, running } = await this.coverageAndRunning(keys, options.now ?? Date.now(), options.role);
    if (![...covered.values()].some((blocks) => blocks > 0)) return null;
    const waiting = await options.waitingOf([...covered.keys()]);
    const load = new Map([...covered.keys()].map((w) => [w, (running.get(w) ?? 0) + (waiting.get(w) ?? 0)]));
    let least = Infinity;
    for (const value of load.values()) least = Math.min(least, value);
    const eligible = new Map([...covered].filter(([w]) => (waiting.get(w) ?? 0) < options.maxQueued && load.get(w)! <= least + options.slack));
    return pickWorker(eligible, load, Infinity);
  }
}

/** The longest cover among workers under the load cap; ties → the smaller backlog; no cover → null. */
export function pickWorker(coverage: ReadonlyMap<string, number>, queued: ReadonlyMap<string, number>, maxQueued: number): RouteChoice | null {
  let best: RouteChoice | null = null;
  let bestQueued = Infinity;
  for (const [workerId, coveredBlocks] of coverage) {
    const backlog = queued.get(workerId) ?? 0;
    if (coveredBlocks === 0 || backlog >= maxQueued) continue;
    if (best === null || coveredBlocks > best.coveredBlocks || (coveredBlocks === best.coveredBlocks && backlog < bestQueued)) {
      best = { workerId, coveredBlocks };
      bestQueued = backlog;
    }
  }
  return best;
}
