/**
 * A run's events to the API through a real Redis (reply-outbox.ts): a message nobody heard (the
 * API's subscription was moving, as in a failover) is re-sent until someone does, and the API's
 * relay puts what arrives back in seq order, each event once; messages unheard for the whole retry
 * window are dropped, and said.
 */
import { Redis } from 'ioredis';
import { describe, expect, it } from 'vitest';

import type { JobEvent } from '../../../src/scheduler/job.ts';
import type { PublishedEvent } from '../../../src/workers/bullmq-protocol.ts';
import { newPendingJob, relayPublished } from '../../../src/workers/bullmq-pending.ts';
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
  it('messages published before the API subscribed are re-sent until it hears them; the API relays each event once, in order', async () => {
    const publisher = new Redis(server().url);
    const subscriber = new Redis(server().url);
    const channel = 'kvtier:events:outbox-1';
    const unheard = deferred();
    const receivers: number[] = [];
    const outbox = new ReplyOutbox(
      async (message) => {
        const n = await publisher.publish(channel, message);
        receivers.push(n);
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
      // The API side: its relay (bullmq-pending.ts) over whatever arrives, single messages or batches.
      const ids: number[] = [];
      const relayed: JobEvent[] = [];
      const onEvent = (event: JobEvent): void => {
        relayed.push(event);
        if (event.type === 'tokens') ids.push(...event.ids);
      };
      const pending = newPendingJob({ onEvent, resolve: () => undefined, reject: () => undefined }, 'q');
      const ended = deferred();
      subscriber.on('message', (_channel: string, message: string) => {
        const parsed = JSON.parse(message) as PublishedEvent | PublishedEvent[];
        for (const one of Array.isArray(parsed) ? parsed : [parsed]) if (relayPublished(pending, one)?.error === null) ended.resolve();
      });
      await subscriber.subscribe(channel);
      await ended.promise;
      await outbox.flushed();
      expect(ids).toEqual([1, 2, 3]);
      expect(relayed.map((e) => e.type)).toEqual(['tokens', 'tokens', 'tokens', 'done']);
      expect(pending.started).toBe(true);
      expect(receivers[0]).toBe(0);
      expect(receivers.at(-1)).toBe(1);
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
      const parsed = JSON.parse(message) as PublishedEvent | PublishedEvent[];
      heard.push(...(Array.isArray(parsed) ? parsed : [parsed]));
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
      expect(warnings[0]).toMatch(/job j: 2 of its events were not delivered for 200 ms \(no API process is subscribed/);
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
