/**
 * Abandoned work stops over BullMQ: a client that hangs up mid-stream makes
 * the API publish a cancel, and the worker holding the job drops it at its
 * scheduler's next step and frees its KV pages. Real redis-server and a real
 * `kvtier worker` process; the worker's scheduler state is read from its
 * heartbeat (GET /admin/stats → tier.workers).
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { CANCEL_CHANNEL, QUEUE_NAME, type PublishedEvent, type QueuedJob } from '../../../src/workers/bullmq-protocol.ts';

import { abandonedStreamChecks, type SchedulerState } from '../serve/abandoned-streams-fixture.ts';
import { ADMIN_TOKEN, startTestServer, type TestServer } from '../serve/server-fixture.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from './processes.ts';

let redis: RedisProcess;
let server: TestServer;
let worker: WorkerProcess;

beforeAll(async () => {
  redis = new RedisProcess(await freePort());
  await redis.start();
  const sharedStorage = mkdtempSync(join(tmpdir(), 'kvtier-cancel-blocks-'));
  server = await startTestServer({ redisUrl: redis.url, storage: `fs:${sharedStorage}`, requestTimeoutMs: 60_000, queueWaitTimeoutMs: 30_000 });
  worker = await startWorker({
    REDIS_URL: redis.url,
    KVTIER_MODEL: 'synthetic:tiny',
    KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), 'kvtier-cancel-worker-')),
    KVTIER_STORAGE: `fs:${sharedStorage}`,
  });
}, 120_000);

afterAll(async () => {
  await server?.close();
  await worker?.stop('SIGKILL');
  await redis?.stop();
});

/** The worker's scheduler state from its first heartbeat after `since` (heartbeats come every 2 s). */
async function workerState(since: number): Promise<SchedulerState> {
  for (let i = 0; i < 200; i++) {
    const response = await fetch(`${server.url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    const body = (await response.json()) as { tier: { workers: { at: number; scheduler: SchedulerState }[] } };
    const fresh = body.tier.workers.find((w) => w.at > since);
    if (fresh) return fresh.scheduler;
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`no worker heartbeat after ${since}`);
}

describe('a streaming client that disconnects (BullMQ runner, kvtier worker)', () => {
  abandonedStreamChecks(() => ({ url: server.url, schedulerState: workerState }));

  it('a cancel that reaches the worker before it submits the job ends the job there, unrun', async () => {
    const publisher = new Redis(redis.url);
    const subscriber = new Redis(redis.url);
    // BullMQ leaves a caller-owned connection open: disconnected below (else it reconnects for the rest of the fork).
    const queueConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
    const queue = new Queue(QUEUE_NAME, { connection: queueConnection });
    try {
      const replyChannel = `kvtier:events:test-early-cancel`;
      const events: PublishedEvent[] = [];
      const done = new Promise<void>((resolve) => {
        subscriber.on('message', (_channel: string, message: string) => {
          // One message, or a tick's messages as an array (reply-outbox.ts).
          const parsed = JSON.parse(message) as PublishedEvent | PublishedEvent[];
          for (const published of Array.isArray(parsed) ? parsed : [parsed]) {
            events.push(published);
            if (published.event?.type === 'done' || published.event?.type === 'error') resolve();
          }
        });
      });
      await subscriber.subscribe(replyChannel);
      const job: QueuedJob = {
        id: 'early-cancel-1',
        model: 'synthetic:tiny',
        tenant: 'alice',
        tenantSalt: '00'.repeat(16),
        trafficClass: 'default',
        tokens: Array.from({ length: 80 }, (_, i) => 1 + (i % 200)),
        sampling: { maxTokens: 200, temperature: 1, topP: 1, topK: 0, seed: 11, stopTokenIds: [] },
        submittedAt: Date.now(),
        replyChannel,
      };
      // Published first (as when a client hangs up while its job is being taken): the worker runs no such job yet.
      expect(await publisher.publish(CANCEL_CHANNEL, job.id)).toBeGreaterThan(0);
      await queue.add('prefill', job, { jobId: job.id, attempts: 1, removeOnComplete: true });
      await done;
      const last = events[events.length - 1].event!;
      expect(last).toMatchObject({ type: 'done', finishReason: 'cancelled', completionTokens: 0 });
      expect(events.some((e) => e.event?.type === 'tokens')).toBe(false);
    } finally {
      await queue.close();
      queueConnection.disconnect();
      publisher.disconnect();
      subscriber.disconnect();
    }
  });
});
