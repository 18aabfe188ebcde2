/**
 * Distributed mode (REDIS_URL): jobs go to a BullMQ queue, `kvtier worker`
 * processes (any number, any machine seeing the same Redis and storage) run
 * them and publish their events on this API process's reply channel.
 *
 *   API ── Queue.add(job {…, replyChannel}) ──▶ Redis ──▶ Worker (engine thread)
 *   API ◀── SUBSCRIBE kvtier:events:<api id> ◀── PUBLISH {jobId, runId, event} ──┘
 *   API ── PUBLISH kvtier:cancel <jobId> ──▶ every worker (the one holding it cancels;
 *          a client that hangs up mid-stream ends its job at the worker's next step)
 *
 * Faults, none of which hangs a request:
 * - a worker killed mid-job stops renewing its lock; BullMQ's stalled check
 *   hands the job to another worker, which runs it again from the start
 *   (new runId). Sampling is seeded and the cache is exact, so the re-run
 *   yields the same tokens: the tokens this API already forwarded are skipped.
 *   A job stalled twice fails → 503 KVT_ERR_WORKER_LOST (the watchdog finds it
 *   in the queue's failed set: bullmq-watchdog.ts).
 * - no worker takes the job within queueWaitTimeoutMs → the job is removed, 503.
 * - Redis unreachable → 503 KVT_ERR_QUEUE_UNAVAILABLE at once; ioredis
 *   reconnects by itself and requests succeed again when Redis is back.
 * - the request timeout (InferenceService) bounds everything else.
 *
 * Where a job goes (KVTIER_DISPATCH: shared, roundrobin, cache-aware), and
 * whether it runs whole or as a prefill and a decode half: bullmq-dispatch.ts.
 * A job on a worker's own queue that is not taken in time, or whose worker
 * died, moves to the shared queue (bullmq-watchdog.ts). Protocol:
 * bullmq-protocol.ts; admin operations: bullmq-admin.ts.
 */
import { randomUUID } from 'node:crypto';

import { Queue } from 'bullmq';

import { CacheAwareRouter, type WorkerRole } from '../cluster/index.ts';
import type { Config } from '../config.ts';
import { describeError, KvtError } from '../errors.ts';
import { modelFingerprint, readGguf } from '../../inference-core/index.ts';
import { createRedisClient, isClusterAddress, redactAddress, RedisPolicyStore, type RedisClient as Redis, type RetentionPolicyDoc } from '../kvtier/index.ts';
import { clusterAdminCall } from './bullmq-admin.ts';
import { JobDispatch, runHalves } from './bullmq-dispatch.ts';
import { newPendingJob, relayPublished, type PendingJob } from './bullmq-pending.ts';
import { DIRECT_QUEUE, DirectHandoff } from './direct-handoff.ts';
import { withTimeout } from '../with-timeout.ts';
import { bullmqPrefix, CANCEL_CHANNEL, LIVE_TTL_MS, QUEUE_NAME, replyChannelName, toQueued, type PublishedEvent, type QueuedJob } from './bullmq-protocol.ts';
import { QueueHandles } from './bullmq-queues.ts';
import { RoutedJobWatchdog } from './bullmq-watchdog.ts';
import { scheduleClusterGc } from './gc-schedule.ts';
import type { AdminCall, JobRunner, RunnerStatus } from './job-runner.ts';
import { type JobEvent, type RequestSpec } from '../scheduler/index.ts';

const REDIS_OPTIONS = { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (times: number) => Math.min(200 * times, 1000) };

export class BullmqRunner implements JobRunner {
  readonly kind = 'bullmq' as const;
  private readonly pending = new Map<string, PendingJob>();
  private readonly replyChannel: string;
  /** On a Redis Cluster the reply channel is sharded (SSUBSCRIBE; bullmq-protocol.ts). */
  private readonly sharded: boolean;
  private subscribed = false;
  /** The watchdog looks for jobs a failover lost only after a fault (bullmq-watchdog.ts). */
  private lastRedisFaultAt = 0;
  private readonly queues: QueueHandles;
  private readonly dispatch: JobDispatch;
  private readonly watchdog: RoutedJobWatchdog;
  /** KVTIER_HANDOFF=direct: jobs for the shared queue handed to an idle worker (null: always BullMQ). */
  private readonly handoff: DirectHandoff | null;

  private constructor(
    private readonly config: Config,
    private readonly connection: Redis,
    private readonly subscriber: Redis,
    private readonly queue: Queue,
    private readonly policyStore: RedisPolicyStore | null,
    private readonly log: (level: 'info' | 'warn' | 'error', message: string) => void,
    /** Clients handed to BullMQ: it leaves caller-owned connections open, so close() ends them. */
    private readonly queueClients: Redis[],
  ) {
    this.sharded = isClusterAddress(config.redisUrl!);
    this.replyChannel = replyChannelName(randomUUID(), config.redisUrl!);
    subscriber.on(this.sharded ? 'smessage' : 'message', (channel: string, message: string) => {
      if (channel === this.replyChannel) this.onPublished(message);
    });
    subscriber.on('ready', () => {
      this.subscribed = false;
      this.subscribe();
    });
    // A fault: a connection lost, or (a Cluster client) a node erroring or leaving the slot map.
    const fault = () => (this.lastRedisFaultAt = Date.now());
    for (const client of [connection, subscriber, ...queueClients]) for (const event of ['error', 'close', 'node error', '-node']) client.on(event, fault);
    for (const client of [connection, subscriber]) client.on('error', (error: Error) => this.log('warn', `redis: ${error.message}`));
    this.queues = new QueueHandles(queueClients[0], bullmqPrefix(config.redisUrl!), (name) => [...this.pending.values()].some((p) => p.queueName === name), log);
    const queueFor = (name: string) => this.queueFor(name);
    const router = new CacheAwareRouter(connection, { ttlMs: LIVE_TTL_MS });
    this.dispatch = new JobDispatch({ config, router, log, queueFor, localWaiting: (name) => this.localWaiting(name) });
    this.handoff = config.handoff === 'direct' ? new DirectHandoff(connection, log) : null;
    this.watchdog = new RoutedJobWatchdog({ config, connection, pending: this.pending, queueFor, handoff: this.handoff, add: (name, queued) => this.add(name, queued), settle: (jobId, error) => this.settle(jobId, error), lastRedisFaultAt: () => this.lastRedisFaultAt, log });
  }

  static async connect(config: Config, log: (level: 'info' | 'warn' | 'error', message: string) => void): Promise<BullmqRunner> {
    const url = config.redisUrl!;
    const connection = createRedisClient(url, REDIS_OPTIONS);
    const subscriber = createRedisClient(url, { ...REDIS_OPTIONS, shardedSubscribers: isClusterAddress(url) });
    const queueClients = [createRedisClient(url, REDIS_OPTIONS)];
    for (const client of queueClients) client.on('error', (error: Error) => log('warn', `redis (queue): ${error.message}`));
    const queue = new Queue(QUEUE_NAME, { connection: queueClients[0], prefix: bullmqPrefix(url) });
    queue.on('error', (error: Error) => log('warn', `queue: ${error.message}`));
    let policy: RedisPolicyStore | null = null;
    try {
      policy = await RedisPolicyStore.open({ url });
    } catch (error) {
      log('warn', `policy store unavailable for now: ${describeError(error).message}`);
    }
    const runner = new BullmqRunner(config, connection, subscriber, queue, policy, log, queueClients);
    await runner.whenSubscribed(10_000);
    // Cluster GC: a repeatable `gc` job any worker runs under the cluster lease (gc-schedule.ts).
    await scheduleClusterGc(queue, config.gcIntervalMs, config.planeShards).catch((error: Error) => log('warn', `scheduling cluster GC failed (GC runs on request only): ${error.message}`));
    return runner;
  }

  /** Context length and fingerprint from the model file (the API process loads no weights). */
  async modelInfo(modelPath: string): Promise<{ fingerprint: string; contextLength: number }> {
    const gguf = readGguf(modelPath, { rejectUnsupportedTypes: false });
    try {
      // `<arch>.context_length`, as the engine reads it for every architecture it serves (load-model.ts), not only the llama family's.
      const arch = gguf.getString('general.architecture');
      return { fingerprint: await modelFingerprint(gguf, { kvDtype: 'f16' }), contextLength: gguf.getU32(`${arch}.context_length`) };
    } finally {
      gguf.close();
    }
  }

  private subscribe(): void {
    if (this.subscribed) return;
    const subscribed: Promise<unknown> = this.sharded ? this.subscriber.ssubscribe(this.replyChannel) : this.subscriber.subscribe(this.replyChannel);
    subscribed.then(
      () => (this.subscribed = true),
      (error: Error) => this.log('warn', `subscribe failed: ${error.message}`),
    );
  }

  private async whenSubscribed(timeoutMs: number): Promise<void> {
    const started = Date.now();
    this.subscribe();
    while (!this.subscribed) {
      if (Date.now() - started > timeoutMs) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `cannot reach Redis at ${redactAddress(this.config.redisUrl!)} within ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  private redisReady(): boolean {
    return this.connection.status === 'ready' && this.subscriber.status === 'ready' && this.subscribed;
  }

  async run(job: RequestSpec, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void> {
    if (!this.redisReady()) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `the job queue (Redis at ${redactAddress(this.config.redisUrl!)}) is unreachable; retry shortly`);
    const waiting = [...this.pending.values()].filter((p) => !p.started).length;
    if (waiting >= this.config.maxQueueDepth) throw new KvtError('KVT_ERR_QUEUE_FULL', `${waiting} requests are already waiting for a worker (KVTIER_MAX_QUEUE=${this.config.maxQueueDepth})`);
    if (job.prefillOnly || !(await this.dispatch.splitAvailable())) return this.runJob(job, 'both', onEvent, signal);
    // No-store: a prefill half would compute blocks only for the decode half to read back; run it whole.
    if (job.retention?.noStore || (await this.dispatch.prefillsOnDecodeSide(job))) return this.runJob({ ...job, id: `${job.id}-d` }, 'decode', onEvent, signal);
    return runHalves(job, (half, role, onHalfEvent, halfSignal) => this.runJob(half, role, onHalfEvent, halfSignal), onEvent, signal, this.log);
  }

  /** This process's jobs on `queueName` that no worker has started yet. */
  private localWaiting(queueName: string): number {
    let n = 0;
    for (const p of this.pending.values()) if (p.queueName === queueName && !p.started) n++;
    return n;
  }

  private queueFor(name: string): Queue {
    return name === QUEUE_NAME ? this.queue : this.queues.get(name);
  }

  /** One job on one queue, to its end; the events go to `onEvent` (a re-run's repeats skipped). */
  private async runJob(job: RequestSpec, role: WorkerRole, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void> {
    const done = new Promise<void>((resolve, reject) => {
      this.pending.set(job.id, newPendingJob({ onEvent, resolve, reject }, QUEUE_NAME));
    });
    const onAbort = () => {
      const pending = this.pending.get(job.id);
      void this.connection.publish(CANCEL_CHANNEL, job.id).catch(() => undefined);
      if (pending) void this.withdraw(job.id, pending).catch(() => undefined);
      this.settle(job.id, signal.reason ?? new KvtError('KVT_ERR_INTERNAL', 'aborted'));
    };
    if (signal.aborted) onAbort();
    else signal.addEventListener('abort', onAbort, { once: true });
    try {
      const queueName = await this.dispatch.chooseQueue(job, role, this.pending.get(job.id));
      const queued = toQueued(job, this.replyChannel);
      // A whole job for the shared queue goes to an idle worker directly while one takes hand-offs (direct-handoff.ts).
      const direct = role === 'both' && queueName === QUEUE_NAME && this.handoff !== null && (await this.handoff.available());
      const pending = this.pending.get(job.id);
      if (pending && direct) {
        const handoff = JSON.stringify(queued);
        Object.assign(pending, { queueName: DIRECT_QUEUE, queued, handoff, addedAt: Date.now() });
        await this.accepted(this.handoff!.push(handoff));
      } else if (pending) {
        Object.assign(pending, { queueName, queued, addedAt: Date.now() });
        await this.add(queueName, queued);
      }
      if (pending && !pending.started && this.pending.get(job.id) === pending) {
        pending.waitTimer = setTimeout(() => {
          const still = this.pending.get(job.id);
          if (!still || still.started) return;
          void this.withdraw(job.id, still).catch(() => undefined);
          this.settle(job.id, new KvtError('KVT_ERR_QUEUE_NO_WORKERS', `no worker took the job within ${this.config.queueWaitTimeoutMs} ms; start \`kvtier worker\` processes on REDIS_URL`));
        }, this.config.queueWaitTimeoutMs);
      }
    } catch (error) {
      this.settle(job.id, error instanceof KvtError ? error : new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', `could not queue the job: ${describeError(error).message}`));
    }
    try {
      await done;
    } finally {
      signal.removeEventListener('abort', onAbort);
    }
  }

  /** Takes a job that no worker may run any more off its queue or the hand-off list (if it is still there). */
  private async withdraw(jobId: string, pending: PendingJob): Promise<unknown> {
    if (pending.handoff !== null) return this.handoff!.takeBack(pending.handoff);
    // A run that a worker took as a hand-off after the job had moved: no queue holds it (the cancel ends it).
    if (pending.queueName === DIRECT_QUEUE) return;
    return this.queueFor(pending.queueName).remove(jobId);
  }

  private add(queueName: string, queued: QueuedJob): Promise<unknown> {
    return this.accepted(this.queueFor(queueName).add('prefill', queued, { jobId: queued.id, attempts: 1, removeOnComplete: true, removeOnFail: { age: 3600 } }));
  }

  /** A job's add or hand-off, bounded: Redis must take it within 3 s. */
  private accepted<T>(sent: Promise<T>): Promise<T> {
    return withTimeout(sent, 3000, () => new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'the job queue (Redis) did not accept the job within 3 s; retry shortly'));
  }

  /** One message, or a run's consecutive messages as an array (reply-outbox.ts). */
  private onPublished(message: string): void {
    let published: PublishedEvent | PublishedEvent[];
    try {
      published = JSON.parse(message);
    } catch {
      this.log('warn', 'unreadable event on the reply channel');
      return;
    }
    for (const one of Array.isArray(published) ? published : [published]) {
      const pending = this.pending.get(one.jobId);
      if (!pending) return;
      const end = relayPublished(pending, one);
      if (end) return this.settle(one.jobId, end.error);
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
      detail: this.redisReady() ? undefined : `Redis at ${redactAddress(this.config.redisUrl!)} is unreachable`,
    };
  }

  policy(): RetentionPolicyDoc | null {
    return this.policyStore?.current().doc ?? null;
  }

  async admin(call: AdminCall): Promise<unknown> {
    if (!this.redisReady()) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'Redis is unreachable');
    return clusterAdminCall(call, { connection: this.connection, queue: this.queue, policy: this.policyStore, replyChannel: this.replyChannel, redisUrl: this.config.redisUrl!, redisOptions: REDIS_OPTIONS });
  }

  async close(): Promise<void> {
    this.watchdog.stop();
    for (const jobId of [...this.pending.keys()]) this.settle(jobId, new KvtError('KVT_ERR_SERVER_SHUTTING_DOWN', 'the API process is stopping'));
    await Promise.allSettled([
      this.queue.close(),
      this.policyStore?.close(),
      this.queues.close(),
    ]);
    this.subscriber.disconnect();
    this.connection.disconnect();
    for (const client of this.queueClients) client.disconnect();
  }
}
