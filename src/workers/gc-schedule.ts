/**
 * Cluster GC on a schedule: one BullMQ job scheduler on the shared queue
 * emits a `gc` job every `everyMs`; whichever worker takes it runs GC under
 * the cluster lease (src/cluster/exclusive-gc.ts), so one GC runs at a time
 * however many workers and API processes there are. Every API process calls
 * this at start: the scheduler id makes it idempotent (the last interval
 * set wins). Embedded mode uses a timer in the engine thread instead
 * (`KvTierOptions.gcIntervalMs`).
 */
import type { Queue } from 'bullmq';

export const GC_SCHEDULER_ID = 'kvtier-gc';

export async function scheduleClusterGc(queue: Queue, everyMs: number): Promise<void> {
  if (everyMs <= 0) {
    await queue.removeJobScheduler(GC_SCHEDULER_ID);
    return;
  }
  await queue.upsertJobScheduler(
    GC_SCHEDULER_ID,
    { every: everyMs },
    // A run that finds the lease held fails with KVT_ERR_CLUSTER_GC_BUSY: kept an hour for `kvtier stats`, never retried (the next tick runs).
    { name: 'gc', data: { scheduled: true }, opts: { attempts: 1, removeOnComplete: { age: 24 * 3600 }, removeOnFail: { age: 3600 } } },
  );
}
