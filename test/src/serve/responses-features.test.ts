/**
 * The Responses API beyond create/GET/DELETE, through the official OpenAI SDK
 * against the real server (synthetic:tiny, embedded engine, context 2048):
 *
 *   - GET /v1/responses/{id}/input_items: the reference's list shape, ids on
 *     every item, a chained response listing its chain (previous input,
 *     previous output, this input), cursor pagination (after / before / limit /
 *     order, the SDK's auto-pagination), tenant scope, 400s naming the field;
 *   - include: accepted values, logprobs and unknown values → 400 naming include,
 *     a reasoning item sent back by its encrypted_content; on DeepSeek R1's
 *     template (real vocabulary, tiny weights) reasoning items carry the token
 *     of their text, created, streamed and on GET;
 *   - background: create → queued, poll → completed (== the foreground reply),
 *     the event stream re-read with starting_after, cancel (status cancelled, the
 *     run's transport slot freed, the record stays cancelled), store: false → 400;
 *   - truncation: disabled → 400 naming the context length; auto → the oldest
 *     items dropped after the instructions, the smallest cut that fits.
 */
import { basename } from 'node:path';

import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { DEEPSEEK_R1_CHAT_TEMPLATE } from '../../../inference-core/synthetic/deepseek-r1-template.ts';
import { reasoningFromToken, reasoningToken } from '../../../src/recipe/responses-include.ts';
import { buildRealVocabGguf } from '../../helpers/real-vocab-gguf.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const MODEL = 'synthetic:tiny';
const CONTEXT = 2048;
const INSTRUCTIONS = 'You are kvtier, a terse assistant. Answer in one short line.';

let server: TestServer;
let alice: OpenAI;
let bob: OpenAI;

beforeAll(async () => {
  // One sequence at a time: a background job behind a running one stays queued, which the cancel test needs.
  server = await startTestServer({ maxBatch: 1 });
  alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  bob = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

async function request(method: string, path: string, body?: unknown): Promise<{ status: number; json: { error?: { param?: string; message?: string } } & Record<string, unknown> }> {
  const res = await fetch(`${server.url}${path}`, {
    method,
    headers: { authorization: `Bearer ${KEYS.alice}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  return { status: res.status, json: (await res.json()) as { error?: { param?: string } } };
}

async function listAll(id: string, query: OpenAI.Responses.InputItemListParams = {}): Promise<OpenAI.Responses.ResponseItem[]> {
  const items: OpenAI.Responses.ResponseItem[] = [];
  for await (const item of alice.responses.inputItems.list(id, query)) items.push(item);
  return items;
}

const textOf = (item: OpenAI.Responses.ResponseItem): string =>
  item.type === 'message' ? item.content.map((part) => ('text' in part ? part.text : '')).join('') : item.type === 'function_call_output' ? String(item.output) : '';

async function pollUntil(id: string, done: (r: OpenAI.Responses.Response) => boolean): Promise<OpenAI.Responses.Response> {
  for (;;) {
    const r = await alice.responses.retrieve(id);
    if (done(r)) return r;
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}

describe('GET /v1/responses/{id}/input_items', () => {
  it('lists a string input as one user message with an id; items keep their kinds and ids', async () => {
    const plain = await alice.responses.create({ model: MODEL, input: 'Only this', max_output_tokens: 4, temperature: 0 });
    const page = await alice.responses.inputItems.list(plain.id);
    expect(page.data).toHaveLength(1);
    const [item] = page.data;
    expect(item).toMatchObject({ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'Only this' }] });
    expect(item.id).toMatch(/^msg_/);
    expect(page.has_more).toBe(false);

    const tools = await alice.responses.create({
      model: MODEL,
      input: [
        { role: 'user', content: 'Weather?' },
        { type: 'function_call', id: 'fc_given', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
      max_output_tokens: 4,
      temperature: 0,
    });
    const items = await listAll(tools.id, { order: 'asc' });
    expect(items.map((i) => i.type)).toEqual(['message', 'function_call', 'function_call_output']);
    expect(items[1]).toMatchObject({ id: 'fc_given', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' });
    expect(items[2]).toMatchObject({ call_id: 'call_1', output: 'sunny' });
    expect(new Set(items.map((i) => i.id)).size).toBe(3);
  });

  it('a chained response lists its chain: previous input, previous output, this input (newest first by default)', async () => {
    const first = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'first question', max_output_tokens: 6, temperature: 0 });
    const second = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'second question', previous_response_id: first.id, max_output_tokens: 6, temperature: 0 });
    const third = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: [{ role: 'user', content: [{ type: 'input_text', text: 'third question' }] }], previous_response_id: second.id, max_output_tokens: 6, temperature: 0 });
    const asc = await listAll(third.id, { order: 'asc' });
    expect(asc.map((i) => (i.type === 'message' ? i.role : i.type))).toEqual(['user', 'assistant', 'user', 'assistant', 'user']);
    expect(asc.map(textOf)).toEqual(['first question', first.output_text, 'second question', second.output_text, 'third question']);
    // The previous outputs are listed under their own ids; earlier items keep the ids they were listed with.
    expect(asc[1].id).toBe(first.output[0].id);
    expect(asc[3].id).toBe(second.output[0].id);
    const ofSecond = await listAll(second.id, { order: 'asc' });
    expect(asc.slice(0, 3).map((i) => i.id)).toEqual(ofSecond.map((i) => i.id));
    // Default order: newest first.
    expect((await listAll(third.id)).map((i) => i.id)).toEqual([...asc].reverse().map((i) => i.id));
  });

  it('pages with limit / after / before; has_more, first_id and last_id as the reference', async () => {
    let previous: string | undefined;
    for (let turn = 1; turn <= 3; turn++) {
      const r: OpenAI.Responses.Response = await alice.responses.create({ model: MODEL, input: `turn ${turn}`, max_output_tokens: 3, temperature: 0, ...(previous ? { previous_response_id: previous } : {}) });
      previous = r.id;
    }
    const all = await listAll(previous!, { order: 'asc' });
    expect(all).toHaveLength(5);
    const ids = all.map((i) => i.id);
    // Auto-pagination with limit 2: three requests, every item once, in order.
    expect((await listAll(previous!, { order: 'asc', limit: 2 })).map((i) => i.id)).toEqual(ids);
    const page1 = await alice.responses.inputItems.list(previous!, { order: 'asc', limit: 2 });
    expect(page1.data.map((i) => i.id)).toEqual(ids.slice(0, 2));
    expect(page1.has_more).toBe(true);
    const raw = await request('GET', `/v1/responses/${previous}/input_items?order=asc&limit=2&after=${ids[1]}`);
    expect(raw.json).toMatchObject({ object: 'list', first_id: ids[2], last_id: ids[3], has_more: true });
    const last = await request('GET', `/v1/responses/${previous}/input_items?order=asc&limit=2&after=${ids[3]}`);
    expect(last.json).toMatchObject({ first_id: ids[4], last_id: ids[4], has_more: false });
    const before = await request('GET', `/v1/responses/${previous}/input_items?order=asc&limit=2&before=${ids[3]}`);
    expect((before.json.data as Array<{ id: string }>).map((i) => i.id)).toEqual(ids.slice(1, 3));
    expect(before.json.has_more).toBe(true);
    const desc = await request('GET', `/v1/responses/${previous}/input_items?limit=2&after=${ids[3]}`);
    expect((desc.json.data as Array<{ id: string }>).map((i) => i.id)).toEqual([ids[2], ids[1]]);
  });

  it('is tenant-scoped, 404 for an unknown id, and 400s name the bad query field', async () => {
    const r = await alice.responses.create({ model: MODEL, input: 'mine', max_output_tokens: 3, temperature: 0 });
    await expect(bob.responses.inputItems.list(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(alice.responses.inputItems.list('resp_nope')).rejects.toMatchObject({ status: 404 });
    const unstored = await alice.responses.create({ model: MODEL, input: 'gone', max_output_tokens: 3, temperature: 0, store: false });
    await expect(alice.responses.inputItems.list(unstored.id)).rejects.toMatchObject({ status: 404 });
    for (const [query, param] of [
      ['limit=0', 'limit'],
      ['limit=101', 'limit'],
      ['limit=x', 'limit'],
      ['order=up', 'order'],
      ['after=msg_missing', 'after'],
      ['before=msg_missing', 'before'],
      ['include[]=nope', 'include'],
    ]) {
      const { status, json } = await request('GET', `/v1/responses/${r.id}/input_items?${query}`);
      expect({ query, status, param: json.error?.param }).toEqual({ query, status: 400, param });
    }
    // A documented include value is accepted here too.
    expect((await alice.responses.inputItems.list(r.id, { include: ['file_search_call.results'] })).data).toHaveLength(1);
  });
});

describe('include', () => {
  it('accepts the documented values this server has nothing to add for, and reasoning.encrypted_content', async () => {
    const r = await alice.responses.create({
      model: MODEL,
      input: 'x',
      max_output_tokens: 3,
      temperature: 0,
      include: ['file_search_call.results', 'web_search_call.action.sources', 'message.input_image.image_url', 'computer_call_output.output.image_url', 'code_interpreter_call.outputs', 'reasoning.encrypted_content'],
    });
    expect(r.status).not.toBe('failed');
    expect((await alice.responses.retrieve(r.id, { include: ['reasoning.encrypted_content'] })).id).toBe(r.id);
  });

  it('message.output_text.logprobs and unknown values → 400 naming include', async () => {
    for (const include of [['message.output_text.logprobs'], ['reasoning.everything'], ['file_search_call.results', 'nope']]) {
      const { status, json } = await request('POST', '/v1/responses', { model: MODEL, input: 'x', max_output_tokens: 3, include });
      expect({ include, status, param: json.error?.param }).toEqual({ include, status: 400, param: 'include' });
    }
    expect(/log-probabilities/.test((await request('POST', '/v1/responses', { model: MODEL, input: 'x', include: ['message.output_text.logprobs'] })).json.error!.message!)).toBe(true);
    expect((await request('GET', '/v1/responses/resp_x?include[]=nope')).json.error?.param).toBe('include');
  });

  it('a reasoning item comes back by its encrypted_content (stateless round trip); a foreign token is a 400 naming it', async () => {
    const history = (token: string) => [
      { role: 'user', content: 'Why?' },
      { type: 'reasoning', id: 'rs_1', summary: [], encrypted_content: token },
      { role: 'assistant', content: 'Because.' },
      { role: 'user', content: 'And?' },
    ];
    const ok = await request('POST', '/v1/responses', { model: MODEL, input: history(reasoningToken('the cache was warm')), max_output_tokens: 3, temperature: 0, store: false });
    expect(ok.status).toBe(200);
    const bad = await request('POST', '/v1/responses', { model: MODEL, input: history('gAAAAB-openai-sealed'), max_output_tokens: 3, store: false });
    expect({ status: bad.status, param: bad.json.error?.param }).toEqual({ status: 400, param: 'input[1].encrypted_content' });
  });
});

describe('background', () => {
  it('create → queued at once, poll → completed with the same reply as the foreground request', async () => {
    const params = { model: MODEL, instructions: INSTRUCTIONS, input: 'Run me later', max_output_tokens: 16, temperature: 0 };
    const started = await alice.responses.create({ ...params, background: true });
    expect(started.background).toBe(true);
    expect(['queued', 'in_progress']).toContain(started.status);
    expect(started.output).toEqual([]);
    const done = await pollUntil(started.id, (r) => r.status !== 'queued' && r.status !== 'in_progress');
    expect(['completed', 'incomplete']).toContain(done.status);
    expect(done.background).toBe(true);
    const foreground = await alice.responses.create(params);
    expect(done.output_text).toBe(foreground.output_text);
    expect(done.usage!.output_tokens).toBe(foreground.usage!.output_tokens);
    // It chains like any stored response, and lists its input.
    const next = await alice.responses.create({ model: MODEL, input: 'and?', previous_response_id: done.id, max_output_tokens: 3, temperature: 0 });
    expect(next.status).not.toBe('failed');
    expect((await listAll(done.id)).map(textOf)).toEqual(['Run me later']);
    await expect(bob.responses.retrieve(started.id)).rejects.toMatchObject({ status: 404 });
  });

  it('background + stream: the reference event sequence, re-readable from starting_after', async () => {
    const stream = await alice.responses.create({ model: MODEL, input: 'Stream in the background', max_output_tokens: 12, temperature: 0, background: true, stream: true });
    const events: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of stream) events.push(event);
    const types = events.map((e) => e.type);
    expect(types.slice(0, 3)).toEqual(['response.created', 'response.queued', 'response.in_progress']);
    expect(['response.completed', 'response.incomplete']).toContain(types[types.length - 1]);
    expect(events.map((e) => e.sequence_number)).toEqual(events.map((_, i) => i));
    const final = (events[events.length - 1] as OpenAI.Responses.ResponseCompletedEvent).response;
    const deltas = events.flatMap((e) => (e.type === 'response.output_text.delta' ? [e.delta] : [])).join('');
    expect((await alice.responses.retrieve(final.id)).output_text).toBe(deltas);
    // Resume after event 2: the same events from sequence number 3 on.
    const resumed = await alice.responses.retrieve(final.id, { stream: true, starting_after: 2 });
    const again: OpenAI.Responses.ResponseStreamEvent[] = [];
    for await (const event of resumed) again.push(event);
    expect(again).toEqual(events.slice(3));
  });

  it('cancel: a queued run and a running one end cancelled, their slots freed; cancel is idempotent', async () => {
    // maxBatch 1: the long run holds the engine; the second waits in the queue.
    // A grammar holds the reply open for ≥ 1500 characters (no early end-of-text while the test cancels it).
    const talk = { type: 'object', properties: { talk: { type: 'string', minLength: 1500 } }, required: ['talk'], additionalProperties: false };
    const long = await alice.responses.create({
      model: MODEL,
      input: 'Talk for a long time',
      text: { format: { type: 'json_schema', name: 'talk', schema: talk, strict: true } },
      max_output_tokens: CONTEXT - 64,
      temperature: 0,
      background: true,
      stream: true,
    });
    const iterator = long[Symbol.asyncIterator]();
    let id = '';
    for (;;) {
      const { value } = await iterator.next();
      if (value.type === 'response.created') id = value.response.id;
      if (value.type === 'response.in_progress') break;
    }
    const queued = await alice.responses.create({ model: MODEL, input: 'Wait my turn', max_output_tokens: 8, background: true });
    expect((await alice.responses.retrieve(queued.id)).status).toBe('queued');
    const cancelledQueued = await alice.responses.cancel(queued.id);
    expect(cancelledQueued.status).toBe('cancelled');
    const cancelled = await alice.responses.cancel(id);
    expect(cancelled.status).toBe('cancelled');
    // The stream ends with the cancel.
    const rest: string[] = [];
    for (let step = await iterator.next(); !step.done; step = await iterator.next()) rest.push(step.value.type);
    expect(rest[rest.length - 1]).toBe('response.cancelled');
    expect(rest).not.toContain('response.completed');
    // The transport holds nothing (the engine frees a cancelled sequence: prefill-scheduler.test), and the next request runs.
    expect(server.built.context.runner.status()).toMatchObject({ running: 0, waiting: 0 });
    const after = await alice.responses.create({ model: MODEL, input: 'Next', max_output_tokens: 4, temperature: 0 });
    expect(['completed', 'incomplete']).toContain(after.status);
    // The records stay cancelled; cancelling again answers the same.
    expect((await alice.responses.retrieve(id)).status).toBe('cancelled');
    expect((await alice.responses.retrieve(queued.id)).status).toBe('cancelled');
    expect((await alice.responses.cancel(id)).status).toBe('cancelled');
    await expect(alice.responses.create({ model: MODEL, input: 'x', previous_response_id: id, max_output_tokens: 3 })).rejects.toMatchObject({ status: 400 });
    await expect(bob.responses.cancel(id)).rejects.toMatchObject({ status: 404 });
  });

  it('needs store (400 naming background); only background responses can be cancelled', async () => {
    const { status, json } = await request('POST', '/v1/responses', { model: MODEL, input: 'x', background: true, store: false });
    expect({ status, param: json.error?.param }).toEqual({ status: 400, param: 'background' });
    const foreground = await alice.responses.create({ model: MODEL, input: 'x', max_output_tokens: 3, temperature: 0 });
    await expect(alice.responses.cancel(foreground.id)).rejects.toMatchObject({ status: 400 });
  });
});

describe('truncation', () => {
  // Eight long turns: far more than the 2048-token context together, each a fraction of it.
  const filler = (turn: number) => `turn ${turn}: ` + 'the cache tier keeps every block of the prefix warm and cheap to load again. '.repeat(6);
  const long = Array.from({ length: 8 }, (_, turn) => [
    { role: 'user' as const, content: filler(turn) },
    { role: 'assistant' as const, content: `noted ${turn}` },
  ]).flat();
  const input = [...long, { role: 'user' as const, content: 'So what is kept?' }];

  it('disabled (the default): a prompt over the context is a 400 naming the context length', async () => {
    const { status, json } = await request('POST', '/v1/responses', { model: MODEL, instructions: INSTRUCTIONS, input, max_output_tokens: 16 });
    expect({ status, param: json.error?.param }).toEqual({ status: 400, param: 'input' });
    expect(json.error!.message).toContain(`${CONTEXT}`);
    expect(json.error!.message).toContain('truncation');
  });

  it('auto: drops the oldest items after the instructions, the fewest that make it fit; echoes truncation', async () => {
    const r = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input, max_output_tokens: 16, temperature: 0, truncation: 'auto' });
    expect(r.truncation).toBe('auto');
    expect(r.usage!.input_tokens + 16).toBeLessThanOrEqual(CONTEXT);
    // The expected cut: the first user item from which instructions + the rest fit (each tried with truncation disabled).
    let expected: number | null = null;
    for (let cut = 0; cut < input.length && expected === null; cut += 2) {
      const tried = await request('POST', '/v1/responses', { model: MODEL, instructions: INSTRUCTIONS, input: input.slice(cut), max_output_tokens: 16, temperature: 0, store: false });
      if (tried.status === 200) expected = (tried.json.usage as { input_tokens: number }).input_tokens;
    }
    expect(expected).not.toBeNull();
    expect(r.usage!.input_tokens).toBe(expected);
    const disabled = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'short', max_output_tokens: 4, temperature: 0 });
    expect(disabled.truncation).toBe('disabled');
    // Nothing can be dropped from one item that alone does not fit.
    const tooBig = await request('POST', '/v1/responses', { model: MODEL, input: filler(0).repeat(12), max_output_tokens: 16, truncation: 'auto' });
    expect({ status: tooBig.status, param: tooBig.json.error?.param }).toEqual({ status: 400, param: 'input' });
    const bad = await request('POST', '/v1/responses', { model: MODEL, input: 'x', truncation: 'sometimes' });
    expect({ status: bad.status, param: bad.json.error?.param }).toEqual({ status: 400, param: 'truncation' });
  });
});

describe('include reasoning.encrypted_content on a template that thinks (DeepSeek R1)', () => {
  let r1: TestServer;
  let model: string;
  let client: OpenAI;

  beforeAll(async () => {
    const path = buildRealVocabGguf('deepseek_v3', { chatTemplate: DEEPSEEK_R1_CHAT_TEMPLATE, variant: 'r1-think' });
    model = basename(path, '.gguf');
    r1 = await startTestServer({ model: path });
    client = new OpenAI({ baseURL: `${r1.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  }, 300_000);

  afterAll(async () => {
    await r1?.close();
  });

  const reasoningOf = (output: OpenAI.Responses.ResponseOutputItem[]) => {
    const item = output.find((o) => o.type === 'reasoning');
    if (item?.type !== 'reasoning') throw new Error('no reasoning item');
    return { text: (item.content ?? []).map((c) => c.text).join(''), token: item.encrypted_content };
  };

  it('reasoning items carry the token of their text (created, streamed, on GET); without include they do not', async () => {
    const params = { model, input: 'What does a KV cache hold?', max_output_tokens: 12, temperature: 0 };
    const plain = reasoningOf((await client.responses.create(params)).output);
    expect(plain.text.length).toBeGreaterThan(0);
    expect(plain.token ?? undefined).toBeUndefined();
    const created = await client.responses.create({ ...params, include: ['reasoning.encrypted_content'] });
    const withToken = reasoningOf(created.output);
    expect(withToken.text).toBe(plain.text);
    expect(reasoningFromToken(withToken.token!, 'x')).toBe(plain.text);
    expect(reasoningOf((await client.responses.retrieve(created.id, { include: ['reasoning.encrypted_content'] })).output).token).toBe(withToken.token);
    const stored = await client.responses.create(params);
    expect(reasoningOf((await client.responses.retrieve(stored.id)).output).token ?? undefined).toBeUndefined();
    expect(reasoningOf((await client.responses.retrieve(stored.id, { include: ['reasoning.encrypted_content'] })).output).token).toBe(withToken.token);
    const stream = await client.responses.create({ ...params, include: ['reasoning.encrypted_content'], stream: true });
    let streamedToken: string | null | undefined;
    for await (const event of stream) if (event.type === 'response.output_item.done' && event.item.type === 'reasoning') streamedToken = event.item.encrypted_content;
    expect(streamedToken).toBe(withToken.token);
    // Stateless next turn: the reasoning item sent back by its token alone is accepted.
    const next = await client.responses.create({
      model,
      store: false,
      input: [{ role: 'user', content: 'What does a KV cache hold?' }, { type: 'reasoning', id: 'rs_x', summary: [], encrypted_content: withToken.token }, { role: 'assistant', content: created.output_text }, { role: 'user', content: 'And then?' }],
      max_output_tokens: 4,
      temperature: 0,
    });
    expect(next.usage!.input_tokens).toBeGreaterThan(0);
  });
});
