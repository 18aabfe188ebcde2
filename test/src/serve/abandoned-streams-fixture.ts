/**
 * The abandoned-stream checks, run against the in-process runner
 * (abandoned-streams.test.ts) and over BullMQ (test/src/workers/bullmq-cancel.test.ts):
 * a client hangs up mid-stream → its job is ended by its cancel within one
 * engine step and its KV pages are back in the pool; twenty in a row are each
 * ended by their cancel and leave the next request's reply and engine steps
 * unchanged; a client that hangs up before its prompt is even rendered runs
 * no reply at all.
 */
import { connect } from 'node:net';

import { expect, it } from 'vitest';

import { KEYS } from './server-fixture.ts';

/** The worker scheduler's state as GET /admin/stats reports it (src/scheduler/prefill-scheduler.ts SchedulerState). */
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

/**
 * Prompts are picked whose reply runs this long without a stop token, so a hang-up at the first event lands
 * mid-reply even when the relay lags the engine by hundreds of steps (a loaded box, a BullMQ round trip):
 * a reply that ended by itself before its cancel arrived would need a lag of LONG_REPLY steps.
 */
const LONG_REPLY = 1000;
/** What a hung-up stream asks for (prompt + this stays inside synthetic:tiny's 2048-token context). */
const MAX_TOKENS = 1900;

/** A prompt and the seed its reply is sampled with; `turns` earlier short turns put its rendering on the prompt thread. */
interface Talk {
  content: string;
  seed: number;
  turns?: number;
}

/** Earlier turns past INLINE_MAX_MESSAGES (src/serve/prompt-service.ts): the prompt is rendered on the prompt thread, a real wait. */
const THREADED_TURNS = 70;
/** What a hung-up stream with THREADED_TURNS turns (~400 prompt tokens) asks for. */
const THREADED_MAX_TOKENS = 1500;
/** Its reply runs this long at least (few of these longer prompts run LONG_REPLY without a stop token). */
const THREADED_REPLY = 300;

function chatBody({ content, seed, turns = 0 }: Talk, stream: boolean, maxTokens: number): string {
  const earlier = Array.from({ length: turns }, (_, i) => ({ role: i % 2 === 0 ? 'user' : 'assistant', content: 'ok' }));
  // Seeded sampling: the same request gives the same reply (the tiny model's greedy replies end too soon to hang up on).
  return JSON.stringify({ model: 'synthetic:tiny', messages: [{ role: 'system', content: `Session ${content}. Keep talking.` }, ...earlier, { role: 'user', content }], max_tokens: maxTokens, temperature: 1, seed, stream });
}

/** No-store: the reply leaves no retained sequence or stored block behind, so asking again runs the same engine steps. */
const NO_STORE = { 'x-kvtier-cache': 'no-store' };

async function ask(url: string, talk: Talk, maxTokens: number, headers: Record<string, string> = {}): Promise<{ text: string; finish: string; completionTokens: number }> {
  const response = await fetch(`${url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json', ...headers }, body: chatBody(talk, false, maxTokens) });
  const body = (await response.json()) as { choices: { message: { content: string }; finish_reason: string }[]; usage: { completion_tokens: number } };
  expect(response.status, JSON.stringify(body)).toBe(200);
  return { text: body.choices[0].message.content, finish: body.choices[0].finish_reason, completionTokens: body.usage.completion_tokens };
}

/**
 * Streams a reply and hangs up at its first event (the prompt is in, the reply has started), so the hang-up
 * lands well inside a LONG_REPLY reply; false when the reply had already ended.
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

/** Sends a whole streaming request on a plain socket and closes the socket at once: the server sees the close while it renders the prompt. */
function sendThenHangUp(url: string, talk: Talk, maxTokens: number): Promise<void> {
  const { hostname, port } = new URL(url);
  const body = chatBody(talk, true, maxTokens);
  const head = [`POST /v1/chat/completions HTTP/1.1`, `host: ${hostname}:${port}`, `authorization: Bearer ${KEYS.alice}`, 'content-type: application/json', `content-length: ${Buffer.byteLength(body)}`, '', ''].join('\r\n');
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.end(head + body, () => socket.destroy()));
    socket.on('error', reject);
    socket.on('close', () => resolve());
  });
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

const idle = (s: SchedulerState) => s.running === 0 && s.waiting === 0;

/**
 * A prompt and seed whose reply runs `tokens` tokens without a stop token (the tiny model ends many early).
 * Asked with no-store: the search leaves no retained sequence for the hung-up requests to continue.
 */
async function longTalker(url: string, tag: string, tokens = LONG_REPLY, turns = 0): Promise<Talk> {
  // Few prompts run LONG_REPLY tokens: one found is kept for every check against this server.
  const known = talkers.get(`${url} ${tokens} ${turns}`);
  if (known && tokens === LONG_REPLY) return known;
  for (let i = 0; i < 200; i++) {
    const talk = { content: `${tag} variant ${i}: tell me everything.`, seed: 11 + i, turns };
    if ((await ask(url, talk, tokens, NO_STORE)).finish === 'length') {
      talkers.set(`${url} ${tokens} ${turns}`, talk);
      return talk;
    }
  }
  throw new Error(`no prompt of ${tag} ran ${tokens} tokens without stopping`);
}

const talkers = new Map<string, Talk>();

/**
 * A hung-up reply that ended by itself before its cancel arrived is kept for a next turn, like any finished
 * reply (the relay lagged its whole reply behind the engine: a loaded box). A no-store turn of the same prompt
 * adopts that sequence and frees it, so the next check starts from `before` again.
 */
async function dropSelfEnded(target: AbandonedTarget, talk: Talk, before: SchedulerState): Promise<void> {
  const kept = await settled(target, Date.now(), idle);
  expect(kept.retained, 'a reply that ended by itself is retained').toBe(before.retained + 1);
  await ask(target.url, talk, 1, NO_STORE);
  const dropped = await settled(target, Date.now(), (s) => idle(s) && s.ended > kept.ended);
  expect(dropped).toMatchObject({ running: 0, waiting: 0, retained: before.retained, pool: { freeBlocks: before.pool.freeBlocks } });
}

/** A no-store reply of `reference` and the engine steps it took alone (the scheduler idle before and after). */
async function measuredAsk(target: AbandonedTarget, reference: Talk): Promise<{ reply: Awaited<ReturnType<typeof ask>>; steps: number }> {
  const before = await settled(target, Date.now(), idle);
  expect(idle(before)).toBe(true);
  const reply = await ask(target.url, reference, 64, NO_STORE);
  const after = await settled(target, Date.now(), (s) => idle(s) && s.ended > before.ended);
  expect(after.ended).toBe(before.ended + 1);
  return { reply, steps: after.steps - before.steps };
}

export function abandonedStreamChecks(target: () => AbandonedTarget): void {
  it('a client that hangs up mid-stream: its job is ended by its cancel within one engine step and its KV pages are freed', async () => {
    const t = target();
    const content = await longTalker(t.url, 'hang-up');
    // synthetic:tiny decodes a token in well under a millisecond: a relay lagging ~0.1-0.3 s behind the engine (a loaded
    // box) lets a reply end by itself first. Tried up to three times; each ends clean, one at least by its cancel.
    let cancelled = false;
    for (let attempt = 0; attempt < 3 && !cancelled; attempt++) {
      const before = await settled(t, Date.now(), idle);
      const abortedAt = Date.now();
      expect(await streamThenHangUp(t.url, content)).toBe(true);
      const after = await settled(t, abortedAt, (s) => idle(s) && s.ended > before.ended);
      expect(after).toMatchObject({ running: 0, waiting: 0, ended: before.ended + 1 });
      expect(after.cancels.maxStepsAfterCancel).toBeLessThanOrEqual(1);
      cancelled = after.cancels.ended === before.cancels.ended + 1;
      if (!cancelled) {
        await dropSelfEnded(t, content, before);
        continue;
      }
      // Ended by its cancel: freed, never retained, and not run on (uncancelled, the reply takes more than LONG_REPLY steps).
      expect(after.retained).toBe(before.retained);
      expect(after.pool.freeBlocks).toBe(before.pool.freeBlocks);
      expect(after.steps - before.steps).toBeLessThan(LONG_REPLY);
    }
    expect(cancelled).toBe(true);
  });

  it('twenty clients hanging up in a row: each ended by its cancel, the pool back to its level, the next request unchanged', async () => {
    const t = target();
    const reference = await longTalker(t.url, 'reference', 64);
    const first = await measuredAsk(t, reference);
    // One prompt for all twenty: a cancelled sequence is freed, never retained, so each starts afresh.
    const talker = await longTalker(t.url, 'abandoned');
    const before = await settled(t, Date.now(), idle);
    const startedAt = Date.now();
    for (let i = 0; i < 20; i++) expect(await streamThenHangUp(t.url, talker)).toBe(true);
    const after = await settled(t, startedAt, (s) => idle(s) && s.ended >= before.ended + 20);
    expect(after).toMatchObject({ running: 0, waiting: 0 });
    // Each of the twenty ended: by its cancel, within one engine step of it, or — when the relay lagged LONG_REPLY+
    // steps behind the engine — by itself before its cancel arrived. Both counted; together all twenty, and the
    // cancel path must be what ends most of them (a cancel that stopped nothing would leave all twenty to run on).
    expect(after.ended).toBe(before.ended + 20);
    const cancelled = after.cancels.ended - before.cancels.ended;
    const endedFirst = after.ended - before.ended - cancelled;
    process.stdout.write(`[abandoned] twenty hang-ups: ${cancelled} ended by their cancel, ${endedFirst} ended by themselves before it arrived\n`);
    expect(cancelled + endedFirst).toBe(20);
    expect(cancelled).toBeGreaterThanOrEqual(15);
    expect(after.cancels.maxStepsAfterCancel).toBeLessThanOrEqual(1);
    expect(after.steps - before.steps).toBeLessThan(20 * LONG_REPLY);
    // A reply that ended by itself is retained until the next hang-up of the same prompt adopts it (and its
    // cancel frees it): only the last of the twenty can leave one behind.
    if (after.retained !== before.retained) {
      expect(endedFirst).toBeGreaterThan(0);
      await dropSelfEnded(t, talker, before);
    } else expect(after.pool.freeBlocks).toBe(before.pool.freeBlocks);
    // The next request: the same reply in the same number of engine steps as before the twenty.
    const again = await measuredAsk(t, reference);
    expect(again).toEqual(first);
  });

  // Whether the hang-up lands before, during or after the route's wait for the prompt thread depends on timing; the
  // case that slipped through (closed before the route made its signal) is pinned down in test/src/serve/client-gone.test.ts.
  it('a client that hangs up right after sending (its prompt rendered on the prompt thread) runs no reply: the next request takes its own steps alone', async () => {
    const t = target();
    const reference = await longTalker(t.url, 'reference-early', 64);
    const alone = await measuredAsk(t, reference);
    const talker = await longTalker(t.url, 'early', THREADED_REPLY, THREADED_TURNS);
    const before = await settled(t, Date.now(), idle);
    await sendThenHangUp(t.url, talker, THREADED_MAX_TOKENS);
    // Asked right after the hang-up: a job that slipped through would run its LONG_REPLY+ steps beside this one.
    const reply = await ask(t.url, reference, 64, NO_STORE);
    expect(reply).toEqual(alone.reply);
    const after = await settled(t, Date.now(), (s) => idle(s) && s.ended > before.ended);
    expect(after).toMatchObject({ running: 0, waiting: 0, retained: before.retained });
    // Slipped through, the hung-up job runs THREADED_REPLY+ steps; stopped, the reference's steps are all there are.
    expect(after.steps - before.steps).toBeLessThan(alone.steps + THREADED_REPLY / 2);
    expect(after.pool.freeBlocks).toBe(before.pool.freeBlocks);
  });
}
