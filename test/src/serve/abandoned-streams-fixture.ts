/**
 * The abandoned-stream checks, run against the in-process runner
 * (abandoned-streams.test.ts) and over BullMQ (test/src/workers/bullmq-cancel.test.ts):
 * a client hangs up mid-stream → its job is gone from the worker's scheduler,
 * ended within one engine step of the cancel, and its KV pages are back in
 * the pool; twenty in a row leave the next reply identical and the state clean.
 */
import { expect, it } from 'vitest';

import { KEYS } from './server-fixture.ts';

/** The worker scheduler's state as GET /admin/stats reports it (src/workers/prefill-scheduler.ts SchedulerState). */
export interface SchedulerState {
  waiting: number;
  running: number;
  retained: number;
  steps: number;
  ended: number;
  pool: { freeBlocks: number; totalBlocks: number };
  cancels: { ended: number; maxStepsAfterCancel: number };
}

export interface AbandonedTarget {
  url: string;
  /** The scheduler's state as of a moment after `since` (epoch ms; a worker's heartbeat may lag). */
  schedulerState(since: number): Promise<SchedulerState>;
}

/** Prompts are picked whose reply runs this long without a stop token, so a hang-up lands mid-reply. */
const LONG_REPLY = 400;
/** What a hung-up stream asks for (a reply not cancelled would run on past LONG_REPLY steps). */
const MAX_TOKENS = 1500;

/** A prompt and the seed its reply is sampled with. */
interface Talk {
  content: string;
  seed: number;
}

function chatBody({ content, seed }: Talk, stream: boolean, maxTokens: number): string {
  // Seeded sampling: the same request gives the same reply (the tiny model's greedy replies end too soon to hang up on).
  return JSON.stringify({ model: 'synthetic:tiny', messages: [{ role: 'system', content: `Session ${content}. Keep talking.` }, { role: 'user', content }], max_tokens: maxTokens, temperature: 1, seed, stream });
}

async function ask(url: string, talk: Talk, maxTokens: number, headers: Record<string, string> = {}): Promise<{ text: string; finish: string }> {
  const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json', ...headers }, body: chatBody(talk, false, maxTokens) });
  const body = (await response.json()) as { choices: { message: { content: string }; finish_reason: string }[] };
  expect(response.status, JSON.stringify(body)).toBe(200);
  return { text: body.choices[0].message.content, finish: body.choices[0].finish_reason };
}

/**
 * Streams a reply and hangs up at its first event (the prompt is in, the reply has started), so the hang-up
 * lands well inside a LONG_REPLY reply however far the relay lags behind the worker; false when it ended first.
 */
async function streamThenHangUp(url: string, talk: Talk): Promise<boolean> {
  const controller = new AbortController();
  const response = await fetch(`${url}/v1/chat/completions`, {
    method: 'POST',
    headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' },
    body: chatBody(talk, true, MAX_TOKENS),
    signal: controller.signal,
  });
  expect(response.status).toBe(200);
  const reader = response.body!.getReader();
  const decoder = new TextDecoder();
  let seen = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) return false;
    seen += decoder.decode(value, { stream: true });
    if (/"finish_reason":"(stop|length)"/.test(seen)) return false;
    if (seen.includes('data: ')) break;
  }
  controller.abort();
  await reader.cancel().catch(() => undefined);
  return true;
}

/** Polls the state until `done` holds for it (bounded by a number of polls, each after a short pause). */
async function settled(target: AbandonedTarget, since: number, done: (s: SchedulerState) => boolean): Promise<SchedulerState> {
  let state = await target.schedulerState(since);
  for (let i = 0; i < 400 && !done(state); i++) {
    await new Promise((r) => setTimeout(r, 25));
    state = await target.schedulerState(since);
  }
  return state;
}

/**
 * A prompt and seed whose reply runs `tokens` tokens without a stop token (the tiny model ends many early).
 * Asked with no-store: the search leaves no retained sequence for the hung-up requests to continue.
 */
async function longTalker(url: string, tag: string, tokens = LONG_REPLY): Promise<Talk> {
  for (let i = 0; i < 96; i++) {
    const talk = { content: `${tag} variant ${i}: tell me everything.`, seed: 11 + i };
    if ((await ask(url, talk, tokens, { 'x-kvtier-cache': 'no-store' })).finish === 'length') return talk;
  }
  throw new Error(`no prompt of ${tag} ran ${tokens} tokens without stopping`);
}

export function abandonedStreamChecks(target: () => AbandonedTarget): void {
  it('a client that hangs up mid-stream: its job is dropped within one engine step and its KV pages are freed', async () => {
    const t = target();
    const content = await longTalker(t.url, 'hang-up');
    // On a loaded box the relay can lag a whole LONG_REPLY behind the worker, and the reply then ends by itself
    // before the cancel arrives: tried up to three times, and at least one must end by its cancel.
    let cancelled = false;
    for (let attempt = 0; attempt < 3 && !cancelled; attempt++) {
      const before = await settled(t, Date.now(), (s) => s.running === 0 && s.waiting === 0);
      const abortedAt = Date.now();
      expect(await streamThenHangUp(t.url, content)).toBe(true);
      const after = await settled(t, abortedAt, (s) => s.running === 0 && s.waiting === 0 && s.ended > before.ended);
      expect(after).toMatchObject({ running: 0, waiting: 0, retained: before.retained, ended: before.ended + 1 });
      expect(after.pool.freeBlocks).toBe(before.pool.freeBlocks);
      expect(after.cancels.maxStepsAfterCancel).toBeLessThanOrEqual(1);
      cancelled = after.cancels.ended === before.cancels.ended + 1;
      // Not run on: the reply, uncancelled, takes more than LONG_REPLY steps.
      if (cancelled) expect(after.steps - before.steps).toBeLessThan(LONG_REPLY);
    }
    expect(cancelled).toBe(true);
  });

  it('twenty clients hanging up in a row leave the next reply identical and the scheduler and pool clean', async () => {
    const t = target();
    const reference = await longTalker(t.url, 'reference', 64);
    const first = await ask(t.url, reference, 64);
    // One prompt for all twenty: a cancelled sequence is freed, never retained, so each starts afresh.
    const talker = await longTalker(t.url, 'abandoned');
    const before = await settled(t, Date.now(), (s) => s.running === 0 && s.waiting === 0);
    const startedAt = Date.now();
    for (let i = 0; i < 20; i++) expect(await streamThenHangUp(t.url, talker)).toBe(true);
    const after = await settled(t, startedAt, (s) => s.running === 0 && s.waiting === 0 && s.ended >= before.ended + 20);
    expect(after).toMatchObject({ running: 0, waiting: 0, retained: before.retained });
    expect(after.ended).toBe(before.ended + 20);
    // Each ended by its cancel, unless the relay lagged LONG_REPLY tokens behind the worker (a loaded box) and the
    // reply had ended by itself first; the single hang-up above checks the count exactly, and the steps bound below
    // fails if cancels stopped nothing.
    expect(after.cancels.ended - before.cancels.ended).toBeGreaterThan(0);
    expect(after.cancels.maxStepsAfterCancel).toBeLessThanOrEqual(1);
    expect(after.pool.freeBlocks).toBe(before.pool.freeBlocks);
    expect(after.steps - before.steps).toBeLessThan(20 * LONG_REPLY);
    const again = await ask(t.url, reference, 64);
    expect(again).toEqual(first);
    const end = await settled(t, Date.now(), (s) => s.running === 0 && s.waiting === 0);
    expect(end).toMatchObject({ running: 0, waiting: 0 });
  });
}
