/**
 * The API's relay of a job's published events (bullmq-pending.ts relayPublished) when the job runs
 * twice at once: in a Redis Cluster failover a running job's lock can lapse (its renewals fail while
 * the replica is promoted), so BullMQ's stalled check or the API's watchdog hands the job to another
 * worker while the first still runs. Both runs publish the same tokens (seeded sampling, exact cache),
 * interleaved on the reply channel; the request must get each token once, in order.
 */
import { describe, expect, it } from 'vitest';

import { newPendingJob, relayPublished, type PendingJob } from '../../../src/workers/bullmq-pending.ts';
import type { JobEvent } from '../../../src/scheduler/job.ts';

function pendingJob(onEvent: (event: JobEvent) => void): PendingJob {
  return newPendingJob({ onEvent, resolve: () => undefined, reject: () => undefined }, 'kvtier-prefill');
}

const reply = [11, 12, 13, 14, 15, 16, 17, 18];
const tokens = (from: number, to: number): JobEvent => ({ type: 'tokens', ids: reply.slice(from, to) });
const done: JobEvent = { type: 'done', finishReason: 'length', completionTokens: reply.length, workerMs: 1, decodeTokens: reply.length, prefillTokens: 4 };

function relay(events: [run: string, event: JobEvent][]): { ids: number[]; ended: boolean } {
  const ids: number[] = [];
  const pending = pendingJob((event) => event.type === 'tokens' && ids.push(...event.ids));
  let ended = false;
  const seqs = new Map<string, number>();
  for (const [runId, event] of events) {
    const seq = seqs.get(runId) ?? 0;
    seqs.set(runId, seq + 1);
    if (relayPublished(pending, { jobId: 'j', runId, seq, event })?.error === null) ended = true;
  }
  return { ids, ended };
}

describe('relaying a job that runs twice at once', () => {
  it('forwards each token once, in order, however the two runs interleave', () => {
    // Run a is 3 tokens in when run b starts; then they alternate, one token an event.
    const events: [string, JobEvent][] = [['a', tokens(0, 1)], ['a', tokens(1, 2)], ['a', tokens(2, 3)]];
    for (let i = 0; i < reply.length; i++) {
      events.push(['b', tokens(i, i + 1)]);
      if (i + 3 < reply.length) events.push(['a', tokens(i + 3, i + 4)]);
    }
    events.push(['a', done]);
    expect(relay(events)).toEqual({ ids: reply, ended: true });
  });

  it('a re-run after its predecessor stopped replays only what the request has not seen', () => {
    expect(relay([['a', tokens(0, 3)], ['b', tokens(0, 2)], ['b', tokens(2, 5)], ['b', tokens(5, 8)], ['b', done]])).toEqual({ ids: reply, ended: true });
  });

  it('a run that falls behind and comes back forwards nothing twice', () => {
    expect(relay([['a', tokens(0, 2)], ['b', tokens(0, 5)], ['a', tokens(2, 4)], ['a', tokens(4, 6)], ['b', tokens(5, 8)], ['b', done]])).toEqual({ ids: reply, ended: true });
  });
});

describe('relaying a run whose messages were re-sent or overtaken (reply-outbox.ts: the worker re-sends what nobody heard)', () => {
  const message = (seq: number, event: JobEvent) => ({ jobId: 'j', runId: 'a', seq, event });

  it('a copy of a message already relayed is dropped: no token twice, no second end', () => {
    const ids: number[] = [];
    const pending = pendingJob((event) => event.type === 'tokens' && ids.push(...event.ids));
    const sent = [message(0, tokens(0, 2)), message(0, tokens(0, 2)), message(1, tokens(2, 8)), message(1, tokens(2, 8)), message(2, done), message(2, done)];
    const ends = sent.map((m) => relayPublished(pending, m)).filter((end) => end !== null);
    expect(ids).toEqual(reply);
    expect(ends).toEqual([{ error: null }]);
  });

  it('messages that overtook a lost one wait for it, then go in order', () => {
    const ids: number[] = [];
    const pending = pendingJob((event) => event.type === 'tokens' && ids.push(...event.ids));
    expect(relayPublished(pending, message(0, tokens(0, 2)))).toBeNull();
    // 1 was lost in the failover; 2 and 3 were heard after the API resubscribed.
    expect(relayPublished(pending, message(2, tokens(4, 8)))).toBeNull();
    expect(relayPublished(pending, message(3, done))).toBeNull();
    expect(ids).toEqual(reply.slice(0, 2));
    // The worker re-sends everything unheard, in order: 1 (and copies of 2, 3).
    expect(relayPublished(pending, message(1, tokens(2, 4)))).toEqual({ error: null });
    expect(ids).toEqual(reply);
    expect(relayPublished(pending, message(2, tokens(4, 8)))).toBeNull();
    expect(ids).toEqual(reply);
  });

  it('a gap that never fills ends the run with a retryable error once too much waits behind it', () => {
    const pending = pendingJob(() => undefined);
    let end = null;
    for (let seq = 1; end === null && seq < 10_000; seq++) end = relayPublished(pending, message(seq, tokens(0, 1)));
    expect(end?.error?.code).toBe('KVT_ERR_WORKER_LOST');
  });
});
