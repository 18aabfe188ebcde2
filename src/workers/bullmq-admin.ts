/**
 * The admin operations in cluster mode (GET /admin/stats, GET|PUT
 * /admin/policy, POST /admin/purge, POST /admin/gc), run from the API
 * process: stats from the workers' heartbeats, the policy in Redis, a purge
 * through the cluster's purge log, GC as a job on the shared queue.
 */
import { QueueEvents, type Queue } from 'bullmq';

import { appendPurge, awaitPurgeAcks, PURGE_CHANNEL } from '../cluster/index.ts';
import { describeError, KvtError } from '../errors.ts';
import { CodecGate, createRedisClient, keysOnEveryPrimary, type RedisClient as Redis, type RedisConnectOptions, type RedisPolicyStore } from '../kvtier/index.ts';
import type { AdminCall } from './job-runner.ts';
import { failureCode, WORKER_STATS_PREFIX, type WorkerHeartbeat } from './bullmq-protocol.ts';
import { patchPolicyDoc } from '../scheduler/index.ts';

export interface ClusterAdminDeps {
  connection: Redis;
  /** The shared queue (GC runs as a job there). */
  queue: Queue;
  /** Where a GC call's QueueEvents connect (opened per call: the API reads no job events otherwise). */
  redisUrl: string;
  redisOptions: RedisConnectOptions;
  /** Null when Redis was unreachable at start. */
  policy: RedisPolicyStore | null;
  replyChannel: string;
}

export async function clusterAdminCall(call: AdminCall, deps: ClusterAdminDeps): Promise<unknown> {
  const { connection, queue, replyChannel } = deps;
  switch (call.op) {
    case 'stats': {
      const keys = await keysOnEveryPrimary(connection, `${WORKER_STATS_PREFIX}*`);
      const values = keys.length > 0 ? await connection.mget(keys) : [];
      const workers = values.filter((v): v is string => v !== null).map((v): WorkerHeartbeat => JSON.parse(v));
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
      const counts = await queue.getJobCounts('waiting', 'active', 'delayed', 'failed');
      return { cache, workers, queue: counts };
    }
    case 'getPolicy':
      return requirePolicy(deps.policy).current().doc;
    case 'setPolicy': {
      const { force, ...patch } = call.policy ?? {};
      // No engine in this process to measure a codec on: one other than none needs force (kvtier/codecs/codec-gate.ts).
      new CodecGate().checkPatch(patch, force === true);
      const next = await requirePolicy(deps.policy).update((doc) => patchPolicyDoc(doc, patch));
      return next.doc;
    }
    case 'purge': {
      // Every live worker applies it to its own index and caches (src/cluster/purge-log.ts) and acknowledges.
      const gen = await appendPurge(connection, call.filter ?? {}, call.at ?? Date.now());
      await connection.publish(PURGE_CHANNEL, String(gen));
      const acks = await awaitPurgeAcks(connection, WORKER_STATS_PREFIX, gen, 30_000);
      return { gen, workers: acks };
    }
    case 'gc': {
      // Subscribed before the job is added, so its end cannot come before the subscription.
      const client = createRedisClient(deps.redisUrl, deps.redisOptions);
      client.on('error', () => undefined); // a fault shows as the wait's failure below
      const events = new QueueEvents(queue.name, { connection: client, prefix: queue.opts.prefix });
      try {
        await events.waitUntilReady();
        // Kept a while after completion: waitUntilFinished polls the job once after subscribing, and a
        // quick GC already removed on completion would read as missing there, i.e. as a failure.
        const job = await queue.add('gc', { replyChannel }, { removeOnComplete: { age: 300 }, removeOnFail: { age: 3600 } });
        try {
          const result: unknown = await job.waitUntilFinished(events, 60_000);
          return result;
        } catch (error) {
          const reason = describeError(error).message;
          const code = /timed out before finishing/.test(reason) ? 'KVT_ERR_WORKER_TIMEOUT' : failureCode(reason);
          throw new KvtError(code, `GC job ${job.id}: ${reason}`, { cause: error });
        }
      } finally {
        await events.close();
        client.disconnect();
      }
    }
    default:
      const unknownCall: { op?: unknown } = call;
      throw new KvtError('KVT_ERR_REQUEST_INVALID', `unknown admin op ${String(unknownCall.op)}`);
  }
}

function requirePolicy(policy: RedisPolicyStore | null): RedisPolicyStore {
  if (!policy) throw new KvtError('KVT_ERR_QUEUE_UNAVAILABLE', 'the policy store (Redis) was unreachable at start; restart the API process');
  return policy;
}
