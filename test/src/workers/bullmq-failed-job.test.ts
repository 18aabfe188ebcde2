/**
 * A job that fails with nobody left to say so ends its request (bullmq-watchdog.ts): BullMQ's
 * stalled check fails a job whose workers died twice, and no worker publishes anything then. The
 * API reads no job event stream; its watchdog finds the job in the queue's failed set. Here the
 * dying worker is the test, holding the job's lock through BullMQ's own API and failing it with
 * the reason BullMQ's stalled check writes. And a worker that cannot run a job (another model)
 * says so on the reply channel, so that request ends without waiting for the watchdog.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Worker, type Job } from 'bullmq';
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

/** The request's end: 'ended', or the error's code. */
function outcome(run: Promise<void>): Promise<string> {
  return run.then(
    () => 'ended',
    (error: { code?: string }) => error.code ?? String(error),
  );
}

describe('a job that failed on the queue', () => {
  it('stalled twice (no worker left to report it): the request ends with KVT_ERR_WORKER_LOST', async () => {
    const url = server().url;
    const config = loadConfig({}, [], { redisUrl: url, model: 'synthetic:tiny', queueWaitTimeoutMs: 60_000, requestTimeoutMs: 120_000 });
    const runner = await BullmqRunner.connect(config, () => undefined);
    const connection = new Redis(url, { maxRetriesPerRequest: null });
    const taker = new Worker(QUEUE_NAME, null, { connection, autorun: false });
    try {
      const job = schedulerJob('stalled-1', [1, 2, 3, 4, 5]);
      const events: JobEvent[] = [];
      const ended = outcome(runner.run(job, (event) => events.push(event), new AbortController().signal));
      // The "worker" takes the job (waiting until one is there) and dies with it.
      const token = 'dying-worker';
      let taken: Job | undefined;
      for (;;) {
        taken = await taker.getNextJob(token, { block: true });
        if (taken?.id === job.id) break;
        // The API's repeatable GC job shares the queue: put aside (failed), it is not under test.
        if (taken !== undefined) await taken.moveToFailed(new Error('not under test'), token, false);
      }
      await taken.moveToFailed(new Error('job stalled more than allowable limit'), token, false);
      expect(await ended).toBe('KVT_ERR_WORKER_LOST');
      expect(events).toEqual([]);
    } finally {
      await taker.close();
      connection.disconnect();
      await runner.close();
    }
  });

  it('a worker serving another model: the request ends with KVT_ERR_WORKER_FAILED, reported by the worker', async () => {
    const url = server().url;
    const config = loadConfig({}, [], { redisUrl: url, model: 'synthetic:tiny', queueWaitTimeoutMs: 60_000 });
    const logged: string[] = [];
    const runner = await BullmqRunner.connect(config, (_level, message) => logged.push(message));
    try {
      workers.push(await startWorker({ REDIS_URL: url, KVTIER_MODEL: 'synthetic:tiny', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), 'kvtier-failed-job-')) }));
      const job = schedulerJob('other-model-1', [1, 2, 3, 4, 5], { model: 'synthetic:small' });
      const events: JobEvent[] = [];
      const error = await runner.run(job, (event) => events.push(event), new AbortController().signal).then(
        () => null,
        (e: { code?: string; message: string }) => e,
      );
      expect(error?.code).toBe('KVT_ERR_WORKER_FAILED');
      expect(error?.message).toMatch(/this worker serves synthetic:tiny, the job asks for synthetic:small/);
      // The worker's own error event (its text as sent), not the watchdog's find in the failed set ("the job failed on its worker: …").
      expect(error?.message).not.toMatch(/the job failed on its worker/);
      expect(logged.filter((m) => /failed jobs of/.test(m))).toEqual([]);
    } finally {
      await runner.close();
    }
  });
});
