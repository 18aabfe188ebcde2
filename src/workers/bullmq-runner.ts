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
 */
import { randomUUID } from 'node:crypto';

import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';

import type { Config } from '../config.ts';
import { KvtError } from '../errors.ts';
import { modelConfigFromGguf, modelFingerprint, readGguf } from '../../inference-core/index.ts';
import { RedisPolicyStore, validatePolicyDoc, type RetentionPolicyDoc } from '../kvtier/index.ts';
import type { AdminCall, JobRunner, RunnerStatus } from './job-runner.ts';
import type { JobEvent, PrefillJob } from './job.ts';

export const QUEUE_NAME = 'kvtier-prefill';
export const CANCEL_CHANNEL = 'kvtier:cancel';
export const WORKER_STATS_PREFIX = 'kvtier:worker:';

/** What travels in the BullMQ job. */
export interface QueuedJob extends PrefillJob {
  replyChannel: string;
}

/** What a worker publishes on the reply channel. */
export interface PublishedEvent {
  jobId: string;
  /** Differs per attempt: a stalled job re-run elsewhere gets a new one. */
  runId: string;
  event: JobEvent;
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
}

export class BullmqRunner implements JobRunner {
  readonly kind = 'bullmq' as const;
  private readonly pending = new Map<string, Pending>();
  private readonly replyChannel = `kvtier:events:${randomUUID()}`;
  private subscribed = false;

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
    queueEvents.on('failed', ({ jobId, failedReason }) => {
      const pending = this.pending.get(jobId);
      if (pending) this.settle(jobId, new KvtError(reasonCode(failedReason), `the job failed on its worker: ${failedReason}`));
    });
    for (const client of [connection, subscriber]) {
      client.on('error', (error: Error) => this.log('warn', `redis: ${error.message}`));
    }
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
    const done = new Promise<void>((resolve, reject) => {
      this.pending.set(job.id, { onEvent, resolve, reject, runId: null, forwarded: 0, seenInRun: 0, started: false, prefilledSent: false, waitTimer: null });
    });
    const onAbort = () => {
      void this.connection.publish(CANCEL_CHANNEL, job.id).catch(() => undefined);
      void this.queue.remove(job.id).catch(() => undefined);
      this.settle(job.id, signal.reason ?? new KvtError('KVT_ERR_INTERNAL', 'aborted'));
    };
    signal.addEventListener('abort', onAbort, { once: true });
    try {
      const queued: QueuedJob = { ...job, replyChannel: this.replyChannel };
      await withTimeout(
        this.queue.add('prefill', queued, { jobId: job.id, attempts: 1, removeOnComplete: true, removeOnFail: { age: 3600 } }),
        3000,
        () => new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'the job queue (Redis) did not accept the job within 3 s; retry shortly'),
      );
      const pending = this.pending.get(job.id);
      if (pending && !pending.started) {
        pending.waitTimer = setTimeout(() => {
          const still = this.pending.get(job.id);
          if (!still || still.started) return;
          void this.queue.remove(job.id).catch(() => undefined);
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
    }
    if (!pending.started) {
      pending.started = true;
      if (pending.waitTimer) clearTimeout(pending.waitTimer);
    }
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
        const patch = call.policy as Partial<RetentionPolicyDoc>;
        const next = await this.requirePolicy().update((doc) => {
          const merged: RetentionPolicyDoc = { ...doc, ...patch, classes: { ...doc.classes, ...(patch.classes ?? {}) }, tenants: { ...doc.tenants, ...(patch.tenants ?? {}) } } as RetentionPolicyDoc;
          if (patch.quotaBytes === null) delete merged.quotaBytes;
          return validatePolicyDoc(merged);
        });
        return next.doc;
      }
      case 'gc': {
        const job = await this.queue.add('gc', { replyChannel: this.replyChannel }, { removeOnComplete: true, removeOnFail: { age: 3600 } });
        const result: unknown = await job.waitUntilFinished(this.queueEvents, 60_000);
        return result;
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
    for (const jobId of [...this.pending.keys()]) this.settle(jobId, new KvtError('KVT_ERR_SERVER_SHUTTING_DOWN', 'the API process is stopping'));
    await Promise.allSettled([this.queue.close(), this.queueEvents.close(), this.policy?.close()]);
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
