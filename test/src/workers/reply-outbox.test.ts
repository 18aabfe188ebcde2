/**
 * A run's events to the API through a real Redis (reply-outbox.ts): a message nobody heard (the
 * API's subscription was moving, as in a failover) is re-sent until someone does, in order, each seq
 * once; one undelivered for the whole retry window is dropped with what is behind it, and said.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import type { JobEvent } from '../../../src/scheduler/job.ts';
import type { PublishedEvent } from '../../../src/workers/bullmq-protocol.ts';
import { ReplyOutbox } from '../../../src/workers/reply-outbox.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());

const done: JobEvent = { type: 'done', finishReason: 'length', completionTokens: 3, workerMs: 1, decodeTokens: 3, prefillTokens: 4 };

function deferred(): { promise: Promise<void>; resolve: () => void } {
  let resolve!: () => void;
  const promise = new Promise<void>((r) => (resolve = r));
  return { promise, resolve };
}

describe('ReplyOutbox on a real Redis', () => {
  it('messages published before the API subscribed are re-sent until it hears them, in order, each seq once, what queued behind as one PUBLISH', async () => {
    const publisher = new Redis(server().url);
    const subscriber = new Redis(server().url);
    const channel = 'kvtier:events:outbox-1';
    const unheard = deferred();
    const receivers: number[] = [];
    const batches: number[] = [];
    const outbox = new ReplyOutbox(
      async (message) => {
        const n = await publisher.publish(channel, message);
        receivers.push(n);
        if (n > 0) batches.push(message.startsWith('[') ? JSON.parse(message).length : 1);
        if (n === 0) unheard.resolve();
        return n;
      },
      (message) => expect.fail(message),
    );
    try {
      outbox.push({ jobId: 'j', runId: 'r', started: { workerId: 'w', queue: 'q' } });
      for (const id of [1, 2, 3]) outbox.push({ jobId: 'j', runId: 'r', event: { type: 'tokens', ids: [id] } });
      outbox.push({ jobId: 'j', runId: 'r', event: done });
      await unheard.promise;
      const heard: PublishedEvent[] = [];
      const all = deferred();
      subscriber.on('message', (_channel: string, message: string) => {
        const parsed = JSON.parse(message) as PublishedEvent | PublishedEvent[];
        heard.push(...(Array.isArray(parsed) ? parsed : [parsed]));
        if (heard.length === 3) all.resolve();
      });
      await subscriber.subscribe(channel);
      await all.promise;
      await outbox.flushed();
      expect(heard.map((m) => m.seq)).toEqual([0, 1, 2]);
      expect(heard[0].started).toEqual({ workerId: 'w', queue: 'q' });
      expect(heard[1].event).toEqual({ type: 'tokens', ids: [1, 2, 3] });
      expect(heard[2].event).toEqual(done);
      expect(receivers[0]).toBe(0);
      expect(receivers.at(-1)).toBe(1);
      // `started` was in flight alone; the tokens (merged) and the end queued behind it left as one batch.
      expect(batches).toEqual([1, 2]);
    } finally {
      publisher.disconnect();
      subscriber.disconnect();
    }
  });

  it('a PUBLISH that failed is sent again', async () => {
    const publisher = new Redis(server().url);
    const subscriber = new Redis(server().url);
    const channel = 'kvtier:events:outbox-2';
    let failures = 2;
    const heard: PublishedEvent[] = [];
    const got = deferred();
    subscriber.on('message', (_channel: string, message: string) => {
      heard.push(JSON.parse(message));
      got.resolve();
    });
    await subscriber.subscribe(channel);
    const outbox = new ReplyOutbox(
      (message) => (failures-- > 0 ? Promise.reject(new Error('Connection is closed.')) : publisher.publish(channel, message)),
      (message) => expect.fail(message),
    );
    try {
      outbox.push({ jobId: 'j', runId: 'r', event: done });
      await got.promise;
      await outbox.flushed();
      expect(heard).toEqual([{ jobId: 'j', runId: 'r', seq: 0, event: done }]);
      expect(failures).toBe(-1);
    } finally {
      publisher.disconnect();
      subscriber.disconnect();
    }
  });

  it('a message nobody hears for the whole retry window is dropped with what is behind it, and a warning says so', async () => {
    const publisher = new Redis(server().url);
    const warnings: string[] = [];
    let sent = 0;
    const outbox = new ReplyOutbox(
      (message) => {
        sent++;
        return publisher.publish('kvtier:events:nobody', message);
      },
      (message) => warnings.push(message),
      200,
    );
    try {
      outbox.push({ jobId: 'j', runId: 'r', started: { workerId: 'w', queue: 'q' } });
      outbox.push({ jobId: 'j', runId: 'r', event: done });
      await outbox.flushed();
      expect(warnings).toHaveLength(1);
      expect(warnings[0]).toMatch(/job j: its events were not delivered for 200 ms \(no API process is subscribed/);
      const tries = sent;
      expect(tries).toBeGreaterThan(1);
      outbox.push({ jobId: 'j', runId: 'r', event: done });
      await outbox.flushed();
      expect(sent).toBe(tries);
    } finally {
      publisher.disconnect();
    }
  });
});
