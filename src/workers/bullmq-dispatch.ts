/**
 * Where a job goes (KVTIER_DISPATCH) and whether a request is split in a
 * prefill and a decode half; see bullmq-runner.ts for the whole flow.
 *
 * `shared` adds every job to the shared queue (first free worker takes it);
 * `roundrobin` to each live worker's own queue in turn (a baseline). `aware`
 * (the default) first asks the cache-aware router which live worker's RAM
 * holds the longest prefix of the job's tokens, and adds the job to that
 * worker's own queue (kvtier-prefill-w-<id>) unless it is at the load cap; no
 * cover, the cap, or any Redis/routing error → the shared queue.
 *
 * Prefill/decode split: while at least one live `prefill`-role and one
 * `decode`-role worker exist, a request with at least
 * KVTIER_SPLIT_MIN_PREFILL_TOKENS uncached prompt tokens (fewer: only `<id>-d`,
 * which prefills them itself) runs as two jobs: `<id>-p`
 * (prefillOnly: compute the prompt's full blocks and write them through to
 * storage) on the prefill side, then `<id>-d` (the whole job: it loads those
 * blocks, computes the partial last block, generates) on the decode side.
 * The client sees the prefill half's `prefilled` (cached = hits before this
 * request) and the decode half's tokens and done. A failed prefill half
 * costs time only: the decode half then computes the whole prompt.
 *
 *   request ─▶ [<id>-p] kvtier-prefill-prefill | -w-<prefill worker> ─ prefilled ─▶ client
 *           ─▶ [<id>-d] kvtier-prefill-decode  | -w-<decode worker>  ─ tokens…done ─▶ client
 */
import type { Queue } from 'bullmq';

import { routeKeys, type CacheAwareRouter, type WorkerRole } from '../cluster/index.ts';
import type { Config } from '../config.ts';
import { describeError } from '../errors.ts';
import { QUEUE_NAME, roleQueueName, routeScope, workerQueueName } from './bullmq-protocol.ts';
import { type PendingJob } from './bullmq-pending.ts';
import { withTimeout } from '../with-timeout.ts';
import { type JobEvent, type RequestSpec } from '../scheduler/index.ts';

/** Jobs waiting on a worker's own queue at which the router stops preferring it (the load cap). */
export const ROUTE_MAX_WAITING = 2;
/**
 * A hot worker stays preferred while its load (running + waiting jobs) is at most this much above
 * the least loaded worker's: past that, waiting behind its other prompts costs more than the storage
 * read its RAM would save.
 */
export const ROUTE_LOAD_SLACK = 1;
/** A routing answer slower than this is abandoned: the job goes to the shared queue. */
const ROUTE_TIMEOUT_MS = 500;

export interface DispatchDeps {
  config: Config;
  router: CacheAwareRouter;
  log: (level: 'info' | 'warn' | 'error', message: string) => void;
  queueFor(name: string): Queue;
  /** This process's jobs on `queueName` that no worker has started yet. */
  localWaiting(queueName: string): number;
}

export class JobDispatch {
  private splitCache: { at: number; split: boolean } = { at: 0, split: false };
  private readonly routeKeyCache = new WeakMap<Uint32Array, { scope: string; keys: string[] }>();
  private rotation = 0;

  constructor(private readonly deps: DispatchDeps) {}

  /**
   * Conditional disaggregation (as Dynamo's disaggregated router decides by
   * prefill length after prefix hits): a prefill half costs a job round trip
   * and a write-then-read of its blocks, which only pays for enough new
   * tokens. A cached agent turn adds a few dozen; its decode worker computes
   * them itself. "Cached" is the longest cover in any live worker's hot set
   * (blocks there are in the shared store too); a routing fault splits.
   */
  async prefillsOnDecodeSide(job: RequestSpec): Promise<boolean> {
    const threshold = this.deps.config.splitMinPrefillTokens;
    if (threshold === 0) return false;
    if (job.tokens.length < threshold) return true;
    try {
      const covered = await routerAnswer(this.deps.router.coverage(this.routeKeysOf(job)));
      let coveredBlocks = 0;
      for (const blocks of covered.values()) coveredBlocks = Math.max(coveredBlocks, blocks);
      const cachedTokens = coveredBlocks * this.deps.config.blockTokens;
      return job.tokens.length - cachedTokens < threshold;
    } catch (error) {
      this.deps.log('warn', `reading the hot sets for the split failed (${describeError(error).message}); job ${job.id} runs as two halves`);
      return false;
    }
  }

  /**
   * A request's route keys, hashed once: the split decision and each half's
   * routing read them, and the halves share the request's tokens array.
   */
  private routeKeysOf(job: RequestSpec): string[] {
    const scope = routeScope(job);
    const cached = this.routeKeyCache.get(job.tokens);
    if (cached?.scope === scope) return cached.keys;
    const keys = routeKeys(scope, job.tokens, this.deps.config.blockTokens);
    this.routeKeyCache.set(job.tokens, { scope, keys });
    return keys;
  }

  /** Splits while the cluster has both halves live (answer cached for a second: it is read per request). */
  async splitAvailable(): Promise<boolean> {
    const now = Date.now();
    if (now - this.splitCache.at < 1000) return this.splitCache.split;
    try {
      const live = await routerAnswer(this.deps.router.liveRoles(now));
      this.splitCache = { at: now, split: live.prefill > 0 && live.decode > 0 };
    } catch (error) {
      this.deps.log('warn', `reading the live worker roles failed (${describeError(error).message}); running jobs whole`);
      this.splitCache = { at: now, split: false };
    }
    return this.splitCache.split;
  }

  /**
   * The queue for a job of `role`: the cache-aware choice (a worker's own
   * queue) or the role's shared queue. Never throws: routing only picks a
   * faster worker, so any fault here falls back to the shared queue.
   */
  async chooseQueue(job: RequestSpec, role: WorkerRole, pending: PendingJob | undefined): Promise<string> {
    const fallback = role === 'both' ? QUEUE_NAME : roleQueueName(role);
    const claim = (name: string): string => {
      if (pending) Object.assign(pending, { queueName: name, addedAt: Date.now() });
      return name;
    };
    if (this.deps.config.dispatch === 'shared') return fallback;
    if (this.deps.config.dispatch === 'roundrobin') return claim(await this.rotate(role, fallback));
    try {
      const keys = this.routeKeysOf(job);
      if (keys.length === 0) return fallback;
      const choice = await routerAnswer(
        this.deps.router.routeAmong(keys, {
          // A whole job may run on any worker; a split half only on a worker of its role.
          role: role === 'both' ? undefined : role,
          maxQueued: ROUTE_MAX_WAITING,
          slack: ROUTE_LOAD_SLACK,
          // Redis's count covers every API process; this process's own not-yet-started jobs cover a
          // burst whose adds have not landed yet (else all of it would see an empty queue).
          waitingOf: async (workerIds) =>
            new Map(
              await Promise.all(
                workerIds.map(async (w) => {
                  const name = workerQueueName(w);
                  return [w, Math.max(this.deps.localWaiting(name), await this.deps.queueFor(name).getWaitingCount())] as const;
                }),
              ),
            ),
        }),
      );
      if (!choice) return fallback;
      const name = workerQueueName(choice.workerId);
      // Re-checked after the await (a burst's routings all read their backlogs before any had
      // picked) and claimed in the same tick, so the next routing counts this job.
      return claim(this.deps.localWaiting(name) >= ROUTE_MAX_WAITING ? fallback : name);
    } catch (error) {
      this.deps.log('warn', `cache-aware routing failed (${describeError(error).message}); job ${job.id} goes to the shared queue`);
      return fallback;
    }
  }

  /** KVTIER_DISPATCH=roundrobin: the next live worker (of the role) in id order, whatever it holds. */
  private async rotate(role: WorkerRole, fallback: string): Promise<string> {
    try {
      const live = (await routerAnswer(this.deps.router.liveWorkers(Date.now(), role === 'both' ? undefined : role))).sort();
      if (live.length === 0) return fallback;
      return workerQueueName(live[this.rotation++ % live.length]);
    } catch (error) {
      this.deps.log('warn', `round-robin dispatch failed (${describeError(error).message}); the job goes to the shared queue`);
      return fallback;
    }
  }
}

/** Routing only picks a faster worker: a router slower than this is treated as a fault. */
function routerAnswer<T>(promise: Promise<T>): Promise<T> {
  return withTimeout(promise, ROUTE_TIMEOUT_MS, () => new Error(`no answer within ${ROUTE_TIMEOUT_MS} ms`));
}

/**
 * A request as its two halves (the split above): the prefill half first, then
 * the decode half, which computes the whole prompt when the prefill half failed.
 */
export async function runHalves(
  job: RequestSpec,
  runJob: (half: RequestSpec, role: WorkerRole, onEvent: (event: JobEvent) => void, signal: AbortSignal) => Promise<void>,
  onEvent: (event: JobEvent) => void,
  signal: AbortSignal,
  log: (level: 'info' | 'warn' | 'error', message: string) => void,
): Promise<void> {
  // The client's `prefilled` is the prefill half's (its cached tokens are the hits before
  // this request); the decode half's own one is swallowed, unless the prefill half failed.
  let prefilledSent = false;
  const forward = (event: JobEvent): void => {
    if (event.type === 'prefilled') {
      if (prefilledSent) return;
      prefilledSent = true;
    }
    onEvent(event);
  };
  try {
    const prefillHalf: RequestSpec = { ...job, id: `${job.id}-p`, prefillOnly: true };
    await runJob(prefillHalf, 'prefill', (event) => event.type === 'prefilled' && forward(event), signal);
  } catch (error) {
    if (signal.aborted) throw error;
    log('warn', `the prefill half of ${job.id} failed (${describeError(error).message}); its decode half computes the whole prompt`);
  }
  await runJob({ ...job, id: `${job.id}-d` }, 'decode', forward, signal);
}
