/**
 * What the API process and `kvtier worker` processes say to each other over
 * Redis (BullMQ queues + pub/sub): queue and channel names, the queued job,
 * the events a worker publishes, and how a failed job's code travels.
 *
 *   API ── Queue.add(QueuedJob {…, replyChannel}) ──▶ kvtier-prefill | -prefill | -decode | -w-<worker id>
 *   API ◀── SUBSCRIBE kvtier:events:<api id> ◀── PUBLISH PublishedEvent {jobId, runId, event | started}
 *       (Redis Cluster: SSUBSCRIBE / SPUBLISH kvtier:events:{<api id>}, sharded: only that slot's primary carries it)
 *   API ── PUBLISH kvtier:cancel <jobId> ──▶ every worker (the one holding it cancels)
 *   worker ── SET kvtier:{workers}:<id> {stats, scheduler, …} EX 15 (heartbeat)
 *
 * On a Redis Cluster (KVTIER_REDIS_CLUSTER) every queue uses the hash-tagged BullMQ prefix `{kvtier}`, so each
 * queue's keys (and BullMQ's multi-key scripts) stay in one slot.
 *
 * Both sides import this file; neither imports the other.
 */
import { isClusterAddress, type RedisClient } from '../kvtier/index.ts';
import type { JobEvent, RequestSpec } from '../scheduler/index.ts';

export const QUEUE_NAME = 'kvtier-prefill';
export const CANCEL_CHANNEL = 'kvtier:cancel';
// Hash-tagged: the heartbeats are read with one MGET (one slot on a Redis Cluster).
export const WORKER_STATS_PREFIX = 'kvtier:{workers}:';

/** What a worker's heartbeat stores under WORKER_STATS_PREFIX + its id (bullmq-worker.ts), as the API's stats read it. */
export interface WorkerHeartbeat {
  workerId?: string;
  cache?: { bytesRead: number; bytesWritten: number; gc: { expired: { blocks: number }; evicted: { blocks: number } } } | null;
}
/** A worker is live (routable, counted for the split) this long after its last heartbeat (every KVTIER_HEARTBEAT_MS, 2 s by default). */
export const LIVE_TTL_MS = 10_000;

/** BullMQ's key prefix: hash-tagged on a Redis Cluster; BullMQ's default (`bull`) on one Redis. */
export function bullmqPrefix(redisUrl: string): string | undefined {
  return isClusterAddress(redisUrl) ? '{kvtier}' : undefined;
}

/** An API process's reply channel; the hash tag marks it sharded (cluster: SPUBLISH to the tag's slot). */
export function replyChannelName(apiId: string, redisUrl: string): string {
  return isClusterAddress(redisUrl) ? `kvtier:events:{${apiId}}` : `kvtier:events:${apiId}`;
}

/** Publishes on a reply channel the way its name says: sharded (SPUBLISH) or plain. */
export function publishReply(client: RedisClient, channel: string, message: string): Promise<number> {
  // ioredis types SPUBLISH's reply as unknown; it is the receiver count, as PUBLISH's is.
  return channel.includes('{') ? client.spublish(channel, message).then(Number) : client.publish(channel, message);
}

/** A split half's queue: kvtier-prefill-prefill, kvtier-prefill-decode. */
export function roleQueueName(role: 'prefill' | 'decode'): string {
  return `${QUEUE_NAME}-${role}`;
}

/** The queue only that worker consumes (jobs routed to it). */
export function workerQueueName(workerId: string): string {
  return `${QUEUE_NAME}-w-${workerId}`;
}

/** What route keys are chained from: one model, one tenant namespace (as the tier's block keys). */
export function routeScope(job: Pick<RequestSpec, 'model' | 'tenantSalt'>): string {
  return `${job.model}\u0000${job.tenantSalt}`;
}

/** What travels in the BullMQ job (JSON: the token ids as a plain array). */
export interface QueuedJob extends Omit<RequestSpec, 'tokens'> {
  tokens: number[];
  replyChannel: string;
}

/** The job as it goes on the queue: the one place its tokens leave Uint32Array. */
export function toQueued(job: RequestSpec, replyChannel: string): QueuedJob {
  return { ...job, tokens: Array.from(job.tokens), replyChannel };
}

/** The job a worker took off the queue: its tokens typed again, once. */
export function fromQueued(queued: QueuedJob): RequestSpec & { replyChannel: string } {
  return { ...queued, tokens: Uint32Array.from(queued.tokens) };
}

/** What a worker publishes on the reply channel: a job event, or that a run started. */
export interface PublishedEvent {
  jobId: string;
  /** Differs per attempt: a stalled job re-run elsewhere gets a new one. */
  runId: string;
  /** The run's messages in order from 0 (`started`): a copy (re-sent) is dropped, a gap is a lost event (reply-outbox.ts). */
  seq: number;
  event?: JobEvent;
  started?: { workerId: string; queue: string };
}

/** BullMQ keeps only a failed job's message (workers lead it with the code): the code back from it. */
export function failureCode(failedReason: string): string {
  const match = /KVT_ERR_[A-Z_]+/.exec(failedReason ?? '');
  if (match) return match[0];
  return /stalled/i.test(failedReason ?? '') ? 'KVT_ERR_WORKER_LOST' : 'KVT_ERR_WORKER_FAILED';
}
