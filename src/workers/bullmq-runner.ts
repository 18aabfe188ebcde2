/**
 * Distributed mode (REDIS_URL): jobs go to a BullMQ queue, `kvtier worker`
 * processes (any number, any machine seeing the same Redis and storage) run
 * them and publish their events on this API process's reply channel.
 *
 *   API ── Queue.add(job {…, replyChannel}) ──▶ Redis ──▶ Worker (engine thread)
 *   API ◀── SUBSCRIBE kvtier:events:<api id> ◀── PUBLISH {jobId, runId, event} ──┘
 *   API ── PUBLISH kvtier:cancel {jobId} ──▶ every worker (the one holding it cancels)
 *
 * Faults, none of which hangs a request:
 * - a worker killed mid-job stops renewing its lock; BullMQ's stalled check
 *   hands the job to another worker, which runs it again from the start
 *   (new runId). Sampling is seeded and the cache is exact, so the re-run
 *   yields the same tokens: the tokens this API already forwarded are skipped.
 *   A job stalled twice fails (QueueEvents 'failed') → 503 KVT_ERR_WORKER_LOST.
 * - no worker takes the job within queueWaitTimeoutMs → the job is removed, 503.
 * - Redis unreachable → 503 KVT_ERR_QUEUE_UNAVAILABLE at once; ioredis
 *   reconnects by itself and requests succeed again when Redis is back.
 * - the request timeout (InferenceService) bounds everything else.
 *
 * Dispatch (KVTIER_DISPATCH): `shared` adds every job to the shared queue
 * (first free worker takes it); `roundrobin` to each live worker's own queue
 * in turn (a baseline). `aware` (the default) first asks the
 * cache-aware router which live worker's RAM holds the longest prefix of the
 * job's tokens, and adds the job to that worker's own queue
 * (kvtier-prefill-w-<id>) unless it is at the load cap; no cover, the cap, or
 * any Redis/routing error → the shared queue. A job on a worker's own queue
 * is watched (watchdog below): not taken within ROUTED_WAIT_MS, or taken by a
 * worker whose job lock then lapsed (it died), it is removed there and added
 * to the shared queue, where BullMQ's stall handling covers it as any other.
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
import { randomUUID } from 'node:crypto';

import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';

import { CacheAwareRouter, routeKeys, type WorkerRole } from '../cluster/index.ts';
import type { Config } from '../config.ts';
import { KvtError } from '../errors.ts';
import { modelConfigFromGguf, modelFingerprint, readGguf } from '../../inference-core/index.ts';
import { CodecGate, RedisPolicyStore, validatePolicyDoc, type RetentionPolicyDoc } from '../kvtier/index.ts';
import { scheduleClusterGc } from './gc-schedule.ts';
import type { AdminCall, JobRunner, RunnerStatus } from './job-runner.ts';
import type { JobEvent, PrefillJob } from './job.ts';

export const QUEUE_NAME = 'kvtier-prefill';
export const CANCEL_CHANNEL = 'kvtier:cancel';
export const WORKER_STATS_PREFIX = 'kvtier:worker:';
/** A worker is live (routable, counted for the split) this long after its last heartbeat (every 2 s). */
export const LIVE_TTL_MS = 10_000;
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
const WATCHDOG_MS = 250;

/** A split half's queue: kvtier-prefill-prefill, kvtier-prefill-decode. */
export function roleQueueName(role: 'prefill' | 'decode'): string {
  return `${QUEUE_NAME}-${role}`;
}

/** The queue only that worker consumes (jobs routed to it). */
export function workerQueueName(workerId: string): string {
  return `${QUEUE_NAME}-w-${workerId}`;
}

/** What route keys are chained from: one model, one tenant namespace (as the tier's block keys). */
export function routeScope(job: Pick<PrefillJob, 'model' | 'tenantSalt'>): string {
  return `${job.model}\u0000${job.tenantSalt}`;
}

/** `prefillOnly` is PrefillJob's own field (job.ts); restated so this file does not depend on when it landed there. */
type SplitJob = PrefillJob & { prefillOnly?: boolean };

/** What travels in the BullMQ job. */
export interface QueuedJob extends PrefillJob {
  replyChannel: string;
}

/** What a worker publishes on the reply channel: a job event, or that a run started. */
export interface PublishedEvent {
  jobId: string;
  /** Differs per attempt: a stalled job re-run elsewhere gets a new one. */
  runId: string;
  event?: JobEvent;
  started?: { workerId: string; queue: string };
}

interface Pending {
  onEvent: (event: JobEvent) => void;
  resolve: () => void;
  reject: (error: unknown) => void;
  runId: string | null;
  /** Tokens forwarded to the request so far (a re-run's first ones are skipped). */
  forwarded: number;
  /** Tokens of the current run seen so far. */
  seenInRun: number;
  started: boolean;
  prefilledSent: boolean;
  waitTimer: NodeJS.Timeout | null;
  /** The queue the job is on now (it moves to the shared queue when its worker does not take it). */
  queueName: string;
  /** The job as added (re-added unchanged when it moves). */
  queued: QueuedJob | null;
  addedAt: number;
  /** Watchdog checks in a row that found the job's lock gone. */
  lockMisses: number;
  moving: boolean;
}

export class BullmqRunner implements JobRunner {
  readonly kind = 'bullmq' as const;
  private readonly pending = new Map<string, Pending>();
  private readonly replyChannel = `kvtier:events:${randomUUID()}`;
  private subscribed = false;
  /** Queues other than the shared one, opened on first use (per-worker ones are dropped when idle). */
  private readonly queues = new Map<string, { queue: Queue; usedAt: number }>();
  private readonly roleEvents: QueueEvents[] = [];
  private readonly router: CacheAwareRouter;
  private readonly watchdog: NodeJS.Timeout;
  private splitCache: { at: number; split: boolean } = { at: 0, split: false };
  private readonly routeKeyCache = new WeakMap<number[], { scope: string; keys: string[] }>();
  private rotation = 0;

  private constructor(
    private readonly config: Config,
    private readonly connection: Redis,
    private readonly subscriber: Redis,
    private readonly queue: Queue,
    private readonly queueEvents: QueueEvents,
    private readonly policy: RedisPolicyStore | null,
    private readonly log: (level: 'info' | 'warn' | 'error', message: string) => void,
    /** Clients handed to BullMQ: it leaves caller-owned connections open, so close() ends them. */
    private readonly queueClients: Redis[],
  ) {
    subscriber.on('message', (channel: string, message: string) => {
      if (channel === this.replyChannel) this.onPublished(message);
    });
    subscriber.on('ready', () => {
      this.subscribed = false;
      this.subscribe();
    });
    const onFailed = (queueName: string) => ({ jobId, failedReason }: { jobId: string; failedReason: string }) => {
      const pending = this.pending.get(jobId);
      if (pending && pending.queueName === queueName) this.settle(jobId, new KvtError(reasonCode(failedReason), `the job failed on its worker: ${failedReason}`));
    };
    queueEvents.on('failed', onFailed(QUEUE_NAME));
    // The split halves' queues: their stalled checks run on their workers; a job stalled twice there fails like on the shared queue.
    for (const role of ['prefill', 'decode'] as const) {
      const name = roleQueueName(role);
      const client = new Redis(config.redisUrl!, { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (times: number) => Math.min(200 * times, 1000) });
      client.on('error', (error: Error) => log('warn', `redis (queue events ${name}): ${error.message}`));
      queueClients.push(client);
      const events = new QueueEvents(name, { connection: client });
      events.on('error', (error: Error) => log('warn', `queue events ${name}: ${error.message}`));
      events.on('failed', onFailed(name));
      this.roleEvents.push(events);
    }
    for (const client of [connection, subscriber]) {
      client.on('error', (error: Error) => this.log('warn', `redis: ${error.message}`));
    }
    this.router = new CacheAwareRouter(connection, { ttlMs: LIVE_TTL_MS });
    this.watchdog = setInterval(() => void this.watch(), WATCHDOG_MS);
    this.watchdog.unref();
  }

  static async connect(config: Config, log: (level: 'info' | 'warn' | 'error', message: string) => void): Promise<BullmqRunner> {
    const url = config.redisUrl!;
    const options = { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (times: number) => Math.min(200 * times, 1000) };
    const connection = new Redis(url, options);
    const subscriber = new Redis(url, options);
    const queueClients = [new Redis(url, options), new Redis(url, options)];
    for (const client of queueClients) client.on('error', (error: Error) => log('warn', `redis (queue): ${error.message}`));
    const queue = new Queue(QUEUE_NAME, { connection: queueClients[0] });
    const queueEvents = new QueueEvents(QUEUE_NAME, { connection: queueClients[1] });
    queue.on('error', (error: Error) => log('warn', `queue: ${error.message}`));
    queueEvents.on('error', (error: Error) => log('warn', `queue events: ${error.message}`));
    let policy: RedisPolicyStore | null = null;
    try {
      policy = await RedisPolicyStore.open({ url });
    } catch (error) {
      log('warn', `policy store unavailable for now: ${(error as Error).message}`);
    }
    const runner = new BullmqRunner(config, connection, subscriber, queue, queueEvents, policy, log, queueClients);
    await runner.whenSubscribed(10_000);
    // Cluster GC: a repeatable `gc` job any worker runs under the cluster lease (gc-schedule.ts).
    await scheduleClusterGc(queue, config.gcIntervalMs).catch((error: Error) => log('warn', `scheduling cluster GC failed (GC runs on request only): ${error.message}`));
    return runner;
  }

  /** Context length and fingerprint from the model file (the API process loads no weights). */
  async modelInfo(modelPath: string): Promise<{ fingerprint: string; contextLength: number }> {
    const gguf = readGguf(modelPath, { rejectUnsupportedTypes: false });
    try {
      return { fingerprint: await modelFingerprint(gguf, { kvDtype: 'f16' }), contextLength: modelConfigFromGguf(gguf).ctxLen };
    } finally {
      gguf.close();
    }
  }

  private subscribe(): void {
    if (this.subscribed) return;
    this.subscriber.subscribe(this.replyChannel).then(
      () => (this.subscribed = true),
      (error: Error) => this.log('warn', `subscribe failed: ${error.message}`),
    );
  }

  private async whenSubscribed(timeoutMs: number): Promise<void> {
    const started = Date.now();
    this.subscribe();
    while (!this.subscribed) {
      if (Date.now() - started > timeoutMs) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `cannot reach Redis at ${redact(this.config.redisUrl!)} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private redisReady(): boolean {
    return this.connection.status === 'ready' && this.subscriber.status === 'ready' && this.subscribed;
  }

  async run(job: PrefillJob, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void> {
    if (!this.redisReady()) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `the job queue (Redis at ${redact(this.config.redisUrl!)}) is unreachable; retry shortly`);
    const waiting = [...this.pending.values()].filter((p) => !p.started).length;
    if (waiting >= this.config.maxQueueDepth) throw new KvtError('KVT_ERR_QUEUE_FULL', `${waiting} requests are already waiting for a worker (KVTIER_MAX_QUEUE=${this.config.maxQueueDepth})`);
    if ((job as SplitJob).prefillOnly || !(await this.splitAvailable())) return this.runJob(job, 'both', onEvent, signal);
    // No-store: a prefill half would compute blocks only for the decode half to read back; run it whole.
    if (job.retention?.noStore || (await this.prefillsOnDecodeSide(job))) return this.runJob({ ...job, id: `${job.id}-d` }, 'decode', onEvent, signal);
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
      const prefillHalf: SplitJob = { ...job, id: `${job.id}-p`, prefillOnly: true };
      await this.runJob(prefillHalf, 'prefill', (event) => event.type === 'prefilled' && forward(event), signal);
    } catch (error) {
      if (signal.aborted) throw error;
      this.log('warn', `the prefill half of ${job.id} failed (${(error as Error).message}); its decode half computes the whole prompt`);
    }
    await this.runJob({ ...job, id: `${job.id}-d` }, 'decode', forward, signal);
  }

  /**
   * Conditional disaggregation (as Dynamo's disaggregated router decides by
   * prefill length after prefix hits): a prefill half costs a job round trip
   * and a write-then-read of its blocks, which only pays for enough new
   * tokens. A cached agent turn adds a few dozen; its decode worker computes
   * them itself. "Cached" is the longest cover in any live worker's hot set
   * (blocks there are in the shared store too); a routing fault splits.
   */
  private async prefillsOnDecodeSide(job: PrefillJob): Promise<boolean> {
    const threshold = this.config.splitMinPrefillTokens;
    if (threshold === 0) return false;
    if (job.tokens.length < threshold) return true;
    try {
      const covered = await routerAnswer(this.router.coverage(this.routeKeysOf(job)));
      let coveredBlocks = 0;
      for (const blocks of covered.values()) coveredBlocks = Math.max(coveredBlocks, blocks);
      const cachedTokens = coveredBlocks * this.config.blockTokens;
      return job.tokens.length - cachedTokens < threshold;
    } catch (error) {
      this.log('warn', `reading the hot sets for the split failed (${(error as Error).message}); job ${job.id} runs as two halves`);
      return false;
    }
  }

  /**
   * A request's route keys, hashed once: the split decision and each half's
   * routing read them, and the halves share the request's tokens array.
   */
  private routeKeysOf(job: PrefillJob): string[] {
    const scope = routeScope(job);
    const cached = this.routeKeyCache.get(job.tokens);
    if (cached?.scope === scope) return cached.keys;
    const keys = routeKeys(scope, Uint32Array.from(job.tokens), this.config.blockTokens);
    this.routeKeyCache.set(job.tokens, { scope, keys });
    return keys;
  }

  /** Splits while the cluster has both halves live (answer cached for a second: it is read per request). */
  private async splitAvailable(): Promise<boolean> {
    const now = Date.now();
    if (now - this.splitCache.at < 1000) return this.splitCache.split;
    try {
      const live = await routerAnswer(this.router.liveRoles(now));
      this.splitCache = { at: now, split: live.prefill > 0 && live.decode > 0 };
    } catch (error) {
      this.log('warn', `reading the live worker roles failed (${(error as Error).message}); running jobs whole`);
      this.splitCache = { at: now, split: false };
    }
    return this.splitCache.split;
  }

  /**
   * The queue for a job of `role`: the cache-aware choice (a worker's own
   * queue) or the role's shared queue. Never throws: routing only picks a
   * faster worker, so any fault here falls back to the shared queue.
   */
  private async chooseQueue(job: PrefillJob, role: WorkerRole, pending: Pending | undefined): Promise<string> {
    const fallback = role === 'both' ? QUEUE_NAME : roleQueueName(role);
    const claim = (name: string): string => {
      if (pending) Object.assign(pending, { queueName: name, addedAt: Date.now() });
      return name;
    };
    if (this.config.dispatch === 'shared') return fallback;
    if (this.config.dispatch === 'roundrobin') return claim(await this.rotate(role, fallback));
    try {
      const keys = this.routeKeysOf(job);
      if (keys.length === 0) return fallback;
      const choice = await routerAnswer(
        this.router.routeAmong(keys, {
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
                  return [w, Math.max(this.localWaiting(name), await this.queueFor(name).getWaitingCount())] as const;
                }),
              ),
            ),
        }),
      );
      if (!choice) return fallback;
      const name = workerQueueName(choice.workerId);
      // Re-checked after the await (a burst's routings all read their backlogs before any had
      // picked) and claimed in the same tick, so the next routing counts this job.
      return claim(this.localWaiting(name) >= ROUTE_MAX_WAITING ? fallback : name);
    } catch (error) {
      this.log('warn', `cache-aware routing failed (${(error as Error).message}); job ${job.id} goes to the shared queue`);
      return fallback;
    }
  }

  /** KVTIER_DISPATCH=roundrobin: the next live worker (of the role) in id order, whatever it holds. */
  private async rotate(role: WorkerRole, fallback: string): Promise<string> {
    try {
      const live = (await routerAnswer(this.router.liveWorkers(Date.now(), role === 'both' ? undefined : role))).sort();
      if (live.length === 0) return fallback;
      return workerQueueName(live[this.rotation++ % live.length]);
    } catch (error) {
      this.log('warn', `round-robin dispatch failed (${(error as Error).message}); the job goes to the shared queue`);
      return fallback;
    }
  }

  /** This process's jobs on `queueName` that no worker has started yet. */
  private localWaiting(queueName: string): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.queueName === queueName && !p.started) n++;
    return n;
  }

  private queueFor(name: string): Queue {
    if (name === QUEUE_NAME) return this.queue;
    const now = Date.now();
    let entry = this.queues.get(name);
    if (!entry) {
      const queue = new Queue(name, { connection: this.queueClients[0] });
      queue.on('error', (error: Error) => this.log('warn', `queue ${name}: ${error.message}`));
      entry = { queue, usedAt: now };
      this.queues.set(name, entry);
      // Workers come and go (their ids are per process): drop queue handles unused for a while.
      for (const [other, { queue: q, usedAt }] of this.queues) {
        if (now - usedAt > 10 * LIVE_TTL_MS && ![...this.pending.values()].some((p) => p.queueName === other)) {
          this.queues.delete(other);
          void q.close().catch(() => undefined);
        }
      }
    }
    entry.usedAt = now;
    return entry.queue;
  }

  /** One job on one queue, to its end; the events go to `onEvent` (a re-run's repeats skipped). */
  private async runJob(job: PrefillJob, role: WorkerRole, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.pending.set(job.id, { onEvent, resolve, reject, runId: null, forwarded: 0, seenInRun: 0, started: false, prefilledSent: false, waitTimer: null, queueName: QUEUE_NAME, queued: null, addedAt: Date.now(), lockMisses: 0, moving: false });
    });
    const onAbort = () => {
      const queueName = this.pending.get(job.id)?.queueName ?? QUEUE_NAME;
      void this.connection.publish(CANCEL_CHANNEL, job.id).catch(() => undefined);
      void this.queueFor(queueName).remove(job.id).catch(() => undefined);
      this.settle(job.id, signal.reason ?? new KvtError('KVT_ERR_INTERNAL', 'aborted'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      const queueName = await this.chooseQueue(job, role, this.pending.get(job.id));
      const queued: QueuedJob = { ...job, replyChannel: this.replyChannel };
      const pending = this.pending.get(job.id);
      if (pending) Object.assign(pending, { queueName, queued, addedAt: Date.now() });
      if (pending) await this.add(queueName, queued);
      if (pending && !pending.started && this.pending.get(job.id) === pending) {
        pending.waitTimer = setTimeout(() => {
          const still = this.pending.get(job.id);
          if (!still || still.started) return;
          void this.queueFor(still.queueName).remove(job.id).catch(() => undefined);
          this.settle(job.id, new KvtError('KVT_ERR_QUEUE_NO_WORKERS', `no worker took the job within ${this.config.queueWaitTimeoutMs} ms; start \`kvtier worker\` processes on REDIS_URL`));
        }, this.config.queueWaitTimeoutMs);
      }
    } catch (error) {
      this.settle(job.id, error instanceof KvtError ? error : new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `could not queue the job: ${(error as Error).message}`));
    }
    try {
      await done;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  private add(queueName: string, queued: QueuedJob): Promise<unknown> {
    return withTimeout(
      this.queueFor(queueName).add('prefill', queued, { jobId: queued.id, attempts: 1, removeOnComplete: true, removeOnFail: { age: 3600 } }),
      3000,
      () => new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'the job queue (Redis) did not accept the job within 3 s; retry shortly'),
    );
  }

  /**
   * Jobs off the shared queue must not be stranded by a worker that died or
   * never takes them. Every WATCHDOG_MS, for each such job:
   *   not started, waiting ≥ ROUTED_WAIT_MS  → remove there (fails if a worker just locked it) → shared queue
   *   started on a worker's own queue, its lock gone on two checks in a row (the worker died)
   *                                          → remove → shared queue (re-run from the start, as a stall)
   * BullMQ's own stalled check covers the role queues (their workers run it).
   */
  private async watch(): Promise<void> {
    const routedWaitMs = Math.min(2000, Math.max(WATCHDOG_MS, Math.floor(this.config.queueWaitTimeoutMs / 4)));
    const now = Date.now();
    for (const [jobId, pending] of this.pending) {
      if (pending.queueName === QUEUE_NAME || pending.moving || !pending.queued) continue;
      const own = pending.queueName.startsWith(`${QUEUE_NAME}-w-`);
      try {
        if (!pending.started) {
          if (now - pending.addedAt >= routedWaitMs) await this.moveToShared(jobId, pending, `not taken within ${routedWaitMs} ms`);
        } else if (own) {
          const queue = this.queueFor(pending.queueName);
          const locked = (await this.connection.exists(queue.toKey(`${jobId}:lock`))) === 1;
          pending.lockMisses = locked ? 0 : pending.lockMisses + 1;
          if (pending.lockMisses >= 2 && (await queue.getJobState(jobId)) === 'active') await this.moveToShared(jobId, pending, 'its worker stopped renewing the job lock');
        }
      } catch (error) {
        this.log('warn', `watching job ${jobId} on ${pending.queueName} failed: ${(error as Error).message}`);
      }
    }
  }

  private async moveToShared(jobId: string, pending: Pending, why: string): Promise<void> {
    pending.moving = true;
    try {
      const from = pending.queueName;
      // 1 = removed; 0 = a worker holds its lock (it started after all): leave it there.
      if ((await this.queueFor(from).remove(jobId)) !== 1) return;
      if (this.pending.get(jobId) !== pending) return;
      pending.queueName = QUEUE_NAME;
      pending.lockMisses = 0;
      await this.add(QUEUE_NAME, pending.queued!);
      this.log('warn', `job ${jobId} moved from ${from} to the shared queue: ${why}`);
    } finally {
      pending.moving = false;
    }
  }

  private onPublished(message: string): void {
    let published: PublishedEvent;
    try {
      published = JSON.parse(message) as PublishedEvent;
    } catch {
      this.log('warn', 'unreadable event on the reply channel');
      return;
    }
    const pending = this.pending.get(published.jobId);
    if (!pending) return;
    const { event } = published;
    if (pending.runId !== published.runId) {
      // A new attempt (the previous worker died): replay only what the request has not seen.
      pending.runId = published.runId;
      pending.seenInRun = 0;
      pending.lockMisses = 0;
      // Its worker says which queue it took the job from (it may have moved meanwhile).
      if (published.started) pending.queueName = published.started.queue;
    }
    if (!pending.started) {
      pending.started = true;
      if (pending.waitTimer) clearTimeout(pending.waitTimer);
    }
    if (!event) return;
    switch (event.type) {
      case 'prefilled':
        if (!pending.prefilledSent) {
          pending.prefilledSent = true;
          pending.onEvent(event);
        }
        return;
      case 'tokens': {
        const fresh = event.ids.filter(() => ++pending.seenInRun > pending.forwarded);
        if (fresh.length === 0) return;
        pending.forwarded += fresh.length;
        pending.onEvent({ type: 'tokens', ids: fresh });
        return;
      }
      case 'done':
        pending.onEvent(event);
        this.settle(published.jobId, null);
        return;
      case 'error':
        this.settle(published.jobId, new KvtError(event.code, event.message));
        return;
    }
  }

  private settle(jobId: string, error: unknown): void {
    const pending = this.pending.get(jobId);
    if (!pending) return;
    this.pending.delete(jobId);
    if (pending.waitTimer) clearTimeout(pending.waitTimer);
    if (error) pending.reject(error);
    else pending.resolve();
  }

  status(): RunnerStatus {
    const waiting = [...this.pending.values()].filter((p) => !p.started).length;
    return {
      kind: 'bullmq',
      ready: this.redisReady(),
      waiting,
      running: this.pending.size - waiting,
      detail: this.redisReady() ? undefined : `Redis at ${redact(this.config.redisUrl!)} is unreachable`,
    };
  }

  async admin(call: AdminCall): Promise<unknown> {
    if (!this.redisReady()) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'Redis is unreachable');
    switch (call.op) {
      case 'stats': {
        const keys = await this.connection.keys(`${WORKER_STATS_PREFIX}*`);
        const values = keys.length > 0 ? await this.connection.mget(keys) : [];
        const workers = values.filter((v): v is string => v !== null).map((v) => JSON.parse(v) as { cache?: { bytesRead: number; bytesWritten: number; gc: { expired: { blocks: number }; evicted: { blocks: number } } } | null });
        const cache = workers.reduce(
          (sum, w) => {
            if (!w.cache) return sum;
            sum.bytesRead += w.cache.bytesRead;
            sum.bytesWritten += w.cache.bytesWritten;
            sum.gc.expired.blocks += w.cache.gc.expired.blocks;
            sum.gc.evicted.blocks += w.cache.gc.evicted.blocks;
            return sum;
          },
          { bytesRead: 0, bytesWritten: 0, gc: { expired: { blocks: 0 }, evicted: { blocks: 0 } } },
        );
        const counts = await this.queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
        return { cache, workers, queue: counts };
      }
      case 'getPolicy':
        return this.requirePolicy().current().doc;
      case 'setPolicy': {
        const { force, ...patch } = call.policy as Partial<RetentionPolicyDoc> & { force?: boolean };
        // No engine in this process to measure a codec on: one other than none needs force (kvtier/codecs/codec-gate.ts).
        new CodecGate().checkPatch(patch, force === true);
        const next = await this.requirePolicy().update((doc) => {
          const merged: RetentionPolicyDoc = { ...doc, ...patch, classes: { ...doc.classes, ...(patch.classes ?? {}) }, tenants: { ...doc.tenants, ...(patch.tenants ?? {}) } } as RetentionPolicyDoc;
          if (patch.quotaBytes === null) delete merged.quotaBytes;
          return validatePolicyDoc(merged);
        });
        return next.doc;
      }
      case 'gc': {
        // Kept a while after completion: waitUntilFinished polls the job once after subscribing, and a
        // quick GC already removed on completion would read as missing there, i.e. as a failure.
        const job = await this.queue.add('gc', { replyChannel: this.replyChannel }, { removeOnComplete: { age: 300 }, removeOnFail: { age: 3600 } });
        try {
          return (await job.waitUntilFinished(this.queueEvents, 60_000)) as unknown;
        } catch (error) {
          const reason = (error as Error).message;
          const code = /timed out before finishing/.test(reason) ? 'KVT_ERR_WORKER_TIMEOUT' : reasonCode(reason);
          throw new KvtError(code, `GC job ${job.id}: ${reason}`, { cause: error });
        }
      }
      default:
        throw new KvtError('KVT_ERR_REQUEST_INVALID', `unknown admin op ${String((call as { op: unknown }).op)}`);
    }
  }

  private requirePolicy(): RedisPolicyStore {
    if (!this.policy) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'the policy store (Redis) was unreachable at start; restart the API process');
    return this.policy;
  }

  async close(): Promise<void> {
    clearInterval(this.watchdog);
    for (const jobId of [...this.pending.keys()]) this.settle(jobId, new KvtError('KVT_ERR_SERVER_SHUTTING_DOWN', 'the API process is stopping'));
    await Promise.allSettled([
      this.queue.close(),
      this.queueEvents.close(),
      this.policy?.close(),
      ...[...this.queues.values()].map((entry) => entry.queue.close()),
      ...this.roleEvents.map((events) => events.close()),
    ]);
    this.subscriber.disconnect();
    this.connection.disconnect();
    for (const client of this.queueClients) client.disconnect();
  }
}

function reasonCode(failedReason: string): string {
  const match = /KVT_ERR_[A-Z_]+/.exec(failedReason ?? '');
  if (match) return match[0];
  return /stalled/i.test(failedReason ?? '') ? 'KVT_ERR_WORKER_LOST' : 'KVT_ERR_WORKER_FAILED';
}

function redact(url: string): string {
  return url.replace(/\/\/([^@/]*)@/, '//***@');
}

/** Routing only picks a faster worker: a router slower than this is treated as a fault. */
function routerAnswer<T>(promise: Promise<T>): Promise<T> {
  return withTimeout(promise, ROUTE_TIMEOUT_MS, () => new Error(`no answer within ${ROUTE_TIMEOUT_MS} ms`));
}

function withTimeout<T>(promise: Promise<T>, ms: number, onTimeout: () => Error): Promise<T> {
  return new Promise((resolve, reject) => {
    const timer = setTimeout(() => reject(onTimeout()), ms);
    promise.then(
      (v) => {
        clearTimeout(timer);
        resolve(v);
      },
      (e: unknown) => {
        clearTimeout(timer);
        reject(e);
      },
    );
  });
}
