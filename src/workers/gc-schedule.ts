/**
 * Cluster GC on a schedule: BullMQ job schedulers on the shared queue emit
 * `gc` jobs every `everyMs`; whichever worker takes one runs GC under the
 * cluster lease (src/cluster/exclusive-gc.ts), so one GC runs at a time
 * however many workers and API processes there are. A sharded plane (S > 1)
 * gets one scheduler per shard (`kvtier-gc-<s>`, job data `{ shard }`), each
 * job under that shard's own lease (src/cluster/sharded-gc.ts): several
 * workers collect different shards at once. Every API process calls this at
 * start: the scheduler ids make it idempotent (the last interval set wins).
 * Embedded mode uses a timer in the engine thread instead
 * (`KvTierOptions.gcIntervalMs`).
 */
import type { Queue } from 'bullmq';

export const GC_SCHEDULER_ID = 'kvtier-gc';

export async function scheduleClusterGc(queue: Queue, everyMs: number, shards = 1): Promise<void> {
  const ids = shards > 1 ? Array.from({ length: shards }, (_, s) => `${GC_SCHEDULER_ID}-${s}`) : [GC_SCHEDULER_ID];
  // Schedulers of another shard layout (S changed needs a migration; a stale one only adds BUSY runs) go.
  for (const scheduler of await queue.getJobSchedulers()) {
    if (scheduler.key.startsWith(GC_SCHEDULER_ID) && (everyMs <= 0 || !ids.includes(scheduler.key))) await queue.removeJobScheduler(scheduler.key);
  }
  if (everyMs <= 0) return;
  for (const [shard, id] of ids.entries()) {
    await queue.upsertJobScheduler(
      id,
      { every: everyMs },
      // A run that finds the lease held fails with KVT_ERR_CLUSTER_GC_BUSY: kept an hour for `kvtier stats`, never retried (the next tick runs).
      { name: 'gc', data: shards > 1 ? { scheduled: true, shard } : { scheduled: true }, opts: { attempts: 1, removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 3600 } } },
    );
  }
}
