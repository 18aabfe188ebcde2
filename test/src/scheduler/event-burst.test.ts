/** The engine thread's events to its owner, one message per synchronous burst (src/scheduler/event-burst.ts). */
import { describe, expect, it } from 'vitest';

import { EventBurst, type JobEventOf } from '../../../src/scheduler/event-burst.ts';

describe('EventBurst', () => {
  it("a synchronous run's events leave as one message, in order; events after an await as the next", async () => {
    const posted: JobEventOf[][] = [];
    const { emit } = new EventBurst((events) => posted.push(events));
    emit('a', { type: 'prefilled', promptTokens: 3, cachedTokens: 0, storedPromptTokens: 0, queueMs: 0, lookupMs: 0, loadMs: 0, prefillMs: 0 });
    emit('a', { type: 'tokens', ids: [5] });
    emit('b', { type: 'tokens', ids: [6] });
    expect(posted).toEqual([]);
    await Promise.resolve();
    expect(posted.map((burst) => burst.map((e) => `${e.jobId}:${e.event.type}`))).toEqual([['a:prefilled', 'a:tokens', 'b:tokens']]);
    emit('b', { type: 'tokens', ids: [7] });
    await new Promise((resolve) => setImmediate(resolve));
    expect(posted).toHaveLength(2);
    expect(posted[1].map((e) => `${e.jobId}:${e.event.type}`)).toEqual(['b:tokens']);
  });

  it("a job's end leaves at once, with what was gathered before it, not after the work that follows it", () => {
    const posted: JobEventOf[][] = [];
    const { emit } = new EventBurst((events) => posted.push(events));
    emit('a', { type: 'tokens', ids: [5] });
    emit('a', { type: 'done', finishReason: 'stop', completionTokens: 1, workerMs: 1, decodeTokens: 0, prefillTokens: 3 });
    expect(posted.map((burst) => burst.map((e) => e.event.type))).toEqual([['tokens', 'done']]);
    emit('b', { type: 'error', code: 'KVT_ERR_INTERNAL', message: 'x' });
    expect(posted).toHaveLength(2);
  });
});
