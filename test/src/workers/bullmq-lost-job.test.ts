/**
 * A job a Redis fault lost from the shared queue (bullmq-watchdog.ts): in a failover, replication is
 * asynchronous, so a job added on the primary just before it died may never reach the promoted
 * replica. The API's watchdog, after a fault, looks for its waiting jobs and adds a lost one again,
 * instead of the request waiting out KVTIER_QUEUE_WAIT_MS for a 503 (before: the 15 s stall of the
 * failover test, then a client retry). Here the loss is made by hand on a real Redis: the job removed
 * from the queue, the API's connections dropped (CLIENT KILL); then a real `kvtier worker` runs it.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Queue, QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, describe, expect, it } from 'vitest';

import { loadConfig } from '../../../src/config.ts';
import type { JobEvent } from '../../../src/scheduler/job.ts';
import { BullmqRunner } from '../../../src/workers/bullmq-runner.ts';
import { QUEUE_NAME } from '../../../src/workers/bullmq-protocol.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';
import { schedulerJob } from '../scheduler/scheduler-fixtures.ts';
import { startWorker, type WorkerProcess } from './processes.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());
const workers: WorkerProcess[] = [];

afterAll(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
});

describe('a job lost from the shared queue by a Redis fault', () => {
  it('is added again by the API after the fault, and a worker runs it to the end', async () => {
    const url = server().url;
    const config = loadConfig({}, [], { redisUrl: url, model: 'synthetic:tiny', queueWaitTimeoutMs: 20_000 });
    let readded!: () => void;
    const addedAgain = new Promise<'added again'>((resolve) => (readded = () => resolve('added again')));
    const runner = await BullmqRunner.connect(config, (_level, message) => {
      if (/added again/.test(message)) readded();
    });
    const admin = new Redis(url);
    // BullMQ leaves caller-owned connections open (a blocking one it duplicates): disconnected below.
    const connections = [new Redis(url, { maxRetriesPerRequest: null }), new Redis(url, { maxRetriesPerRequest: null })];
    const queue = new Queue(QUEUE_NAME, { connection: connections[0] });
    const queueEvents = new QueueEvents(QUEUE_NAME, { connection: connections[1] });
    try {
      await queueEvents.waitUntilReady();
      const job = schedulerJob('lost-1', Array.from({ length: 80 }, (_, i) => 1 + ((i * 7) % 400)), {}, 4);
      const added = new Promise<void>((resolve) => queueEvents.on('waiting', ({ jobId }) => jobId === job.id && resolve()));
      const events: JobEvent[] = [];
      const run = runner.run(job, (event) => events.push(event), new AbortController().signal);
      const ended = run.then(
        () => 'ended',
        (error: { code?: string }) => error.code ?? String(error),
      );
      await added;
      // The loss: the job's hash and its place in the wait list are gone, and the API's connections dropped.
      expect(await queue.remove(job.id)).toBe(1);
      await admin.call('CLIENT', 'KILL', 'TYPE', 'normal', 'SKIPME', 'yes');
      expect(await Promise.race([addedAgain, ended])).toBe('added again');
      expect(await queue.getJobState(job.id)).toBe('waiting');
      workers.push(await startWorker({ REDIS_URL: url, KVTIER_MODEL: 'synthetic:tiny', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), 'kvtier-lost-job-')) }));
      expect(await ended).toBe('ended');
      expect(events.at(-1)?.type).toBe('done');
      expect(events.filter((e) => e.type === 'tokens').flatMap((e) => (e.type === 'tokens' ? e.ids : []))).toHaveLength(4);
    } finally {
      await runner.close();
      await queueEvents.close();
      await queue.close();
      for (const connection of connections) connection.disconnect();
      admin.disconnect();
    }
  });
});
