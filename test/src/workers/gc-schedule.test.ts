import { join } from 'node:path';

import { Queue, Worker } from 'bullmq';
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { gcUnderClusterLease } from '../../../src/cluster/index.ts';
import { KvTier, type GcReport } from '../../../src/kvtier/index.ts';
import { GC_SCHEDULER_ID, scheduleClusterGc } from '../../../src/workers/gc-schedule.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { captureLogger, tempDir } from '../kvtier/fixtures.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());

describe('scheduleClusterGc', () => {
  it('one scheduler however many API processes call it; its gc jobs run GC under the cluster lease on a worker', async () => {
    const connection = () => new Redis(server().url, { maxRetriesPerRequest: null });
    const clients = [connection(), connection(), connection(), connection()];
    const queueA = new Queue('gc-test', { connection: clients[0] });
    const queueB = new Queue('gc-test', { connection: clients[1] });
    const dir = await tempDir();
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, logger: captureLogger(), metadataRedisUrl: '' });
    const reports: GcReport[] = [];
    const worker = new Worker(
      'gc-test',
      async (job) => {
        expect(job.name).toBe('gc');
        const report = await gcUnderClusterLease(clients[3], 'worker-1', () => tier.gc());
        reports.push(report);
        return report.removed;
      },
      { connection: clients[2] },
    );
    try {
      await scheduleClusterGc(queueA, 60_000);
      await scheduleClusterGc(queueB, 300);
      const schedulers = await queueA.getJobSchedulers();
      expect(schedulers).toHaveLength(1);
      expect(schedulers[0]).toMatchObject({ key: GC_SCHEDULER_ID, every: 300 });
      const deadline = Date.now() + 20_000;
      while (reports.length < 2 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 50));
      expect(reports.length).toBeGreaterThanOrEqual(2);
      expect(reports[0].plane.trusted).toBe(true); // the first run rebuilt the (new) plane
      await scheduleClusterGc(queueA, 0);
      expect(await queueA.getJobSchedulers()).toHaveLength(0);
    } finally {
      await worker.close();
      await queueA.close();
      await queueB.close();
      await tier.close();
      await store.close();
      for (const client of clients) client.disconnect();
      await dir.remove();
    }
  });
});
