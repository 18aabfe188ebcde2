/**
 * POST/GET/DELETE /v1/responses through the official OpenAI SDK against the
 * real server (synthetic:tiny, embedded engine): plain, streamed, chained with
 * previous_response_id (cached tokens grow), a function-tool round trip,
 * text.format json_schema, tenant isolation, the same tokens as Chat
 * Completions for the same conversation, and 400s naming the field.
 */
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const MODEL = 'synthetic:tiny';
const BLOCK = 64;
const INSTRUCTIONS = 'You are kvtier, a terse assistant. ' + 'Answer in one short line and cite the cache. '.repeat(12);
const WEATHER = { type: 'function' as const, name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string', maxLength: 12 } }, required: ['city'], additionalProperties: false }, strict: true };

let server: TestServer;
/** How far the server's stored-response clock runs ahead of real time (the TTL test moves it). */
let clockAheadMs = 0;
let alice: OpenAI;
let bob: OpenAI;

beforeAll(async () => {
  server = await startTestServer({}, { now: () => Date.now() + clockAheadMs });
  alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  bob = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

const floorBlocks = (n: number) => Math.floor(n / BLOCK) * BLOCK;

async function post(body: unknown, key: string = KEYS.alice): Promise<{ status: number; json: { error?: { param?: string; code?: string } } }> {
  const res = await fetch(`${server.url}/v1/responses`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${key}` }, body: JSON.stringify(body) });
  return { status: res.status, json: (await res.json()) as { error?: { param?: string } } };
}

describe('POST /v1/responses', () => {
  it('plain: one message item, output_text, usage with cached_tokens', async () => {
    const r = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'What is kvtier?', max_output_tokens: 12, temperature: 0 });
    expect(r.object).toBe('response');
    expect(r.id).toMatch(/^resp_/);
    expect(['completed', 'incomplete']).toContain(r.status);
    expect(r.output).toHaveLength(1);
    expect(r.output[0].type).toBe('message');
    expect(r.output_text.length).toBeGreaterThan(0);
    expect(r.usage!.output_tokens).toBeGreaterThan(0);
    expect(r.usage!.input_tokens).toBeGreaterThan(BLOCK);
    expect(r.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(0);
    expect(r.usage!.total_tokens).toBe(r.usage!.input_tokens + r.usage!.output_tokens);
  });

  it('streamed: the standard event order, deltas concatenate to the final output_text', async () => {
    const stream = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream it.' }] }], max_output_tokens: 12, temperature: 0, stream: true });
    const types: string[] = [];
    let deltas = '';
    let final: OpenAI.Responses.Response | null = null;
    for await (const event of stream) {
      types.push(event.type);
      if (event.type === 'response.output_text.delta') deltas += event.delta;
      if (event.type === 'response.completed' || event.type === 'response.incomplete') final = event.response;
    }
    const dedup = types.filter((t, i) => t !== types[i - 1]);
    expect(dedup.slice(0, 5)).toEqual(['response.created', 'response.in_progress', 'response.output_item.added', 'response.content_part.added', 'response.output_text.delta']);
    expect(dedup.slice(-4)).toEqual(['response.output_text.done', 'response.content_part.done', 'response.output_item.done', final!.status === 'incomplete' ? 'response.incomplete' : 'response.completed']);
    expect(deltas.length).toBeGreaterThan(0);
    const text = final!.output.flatMap((item) => (item.type === 'message' ? item.content.map((p) => (p.type === 'output_text' ? p.text : '')) : [])).join('');
    expect(text).toBe(deltas);
    // The non-streamed request of the same input gives the same text (greedy).
    const plain = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: [{ role: 'user', content: [{ type: 'input_text', text: 'Stream it.' }] }], max_output_tokens: 12, temperature: 0 });
    expect(plain.output_text).toBe(deltas);
  });

  it("the SDK's responses.stream() helper assembles the final response from the events", async () => {
    const stream = alice.responses.stream({ model: MODEL, instructions: INSTRUCTIONS, input: 'Stream it.', max_output_tokens: 12, temperature: 0 });
    let deltas = '';
    stream.on('response.output_text.delta', (event) => (deltas += event.delta));
    const final = await stream.finalResponse();
    // The helper keeps the accumulated snapshot (output_text is only added by non-streamed create).
    const text = final.output.flatMap((item) => (item.type === 'message' ? item.content.map((p) => (p.type === 'output_text' ? p.text : '')) : [])).join('');
    expect(deltas.length).toBeGreaterThan(0);
    expect(text).toBe(deltas);
  });

  it('chained with previous_response_id: cached tokens cover the previous turn and grow every turn', async () => {
    let previous: OpenAI.Responses.Response | null = null;
    let previousTotal = 0;
    let previousCached = -1;
    for (let turn = 1; turn <= 5; turn++) {
      const r: OpenAI.Responses.Response = await alice.responses.create({
        model: MODEL,
        instructions: INSTRUCTIONS,
        input: `Turn ${turn}: and then?`,
        max_output_tokens: 16,
        temperature: 0,
        ...(previous ? { previous_response_id: previous.id } : {}),
      });
      const cached = r.usage!.input_tokens_details.cached_tokens;
      if (turn > 1) {
        expect(r.previous_response_id).toBe(previous!.id);
        expect(cached).toBeGreaterThanOrEqual(floorBlocks(previousTotal));
        expect(cached).toBeGreaterThan(previousCached);
      }
      previousCached = cached;
      previousTotal = r.usage!.input_tokens + r.usage!.output_tokens;
      previous = r;
    }
  });

  it('the same conversation in Chat Completions and Responses: same prompt tokens, same greedy reply', async () => {
    const chat = await alice.chat.completions.create({
      model: MODEL,
      messages: [
        { role: 'system', content: INSTRUCTIONS },
        { role: 'user', content: 'Hello there' },
        { role: 'assistant', content: 'Hi, I am kvtier.' },
        { role: 'user', content: 'Read the file.' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city":"Paris"}' } }] },
        { role: 'tool', tool_call_id: 'call_1', content: 'sunny' },
      ],
      tools: [{ type: 'function', function: { name: WEATHER.name, description: WEATHER.description, parameters: WEATHER.parameters } }],
      max_tokens: 16,
      temperature: 0,
    });
    const resp = await alice.responses.create({
      model: MODEL,
      instructions: INSTRUCTIONS,
      input: [
        { role: 'user', content: 'Hello there' },
        { role: 'assistant', content: 'Hi, I am kvtier.' },
        { role: 'user', content: [{ type: 'input_text', text: 'Read the file.' }] },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city":"Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
      tools: [{ ...WEATHER, strict: false }],
      max_output_tokens: 16,
      temperature: 0,
    });
    expect(resp.usage!.input_tokens).toBe(chat.usage!.prompt_tokens);
    expect(resp.usage!.output_tokens).toBe(chat.usage!.completion_tokens);
    expect(resp.output_text).toBe(chat.choices[0].message.content ?? '');
    // Same prompt tokens: the second request's prompt is entirely cached up to its last whole block.
    expect(resp.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(floorBlocks(resp.usage!.input_tokens - 1));
  });

  it('a function-tool round trip: forced call → function_call item → function_call_output chained → a message', async () => {
    const first = await alice.responses.create({ model: MODEL, instructions: INSTRUCTIONS, input: 'Weather in Paris?', tools: [WEATHER], tool_choice: { type: 'function', name: 'get_weather' }, max_output_tokens: 128, temperature: 0 });
    const call = first.output.find((item) => item.type === 'function_call');
    expect(call).toBeDefined();
    if (call?.type !== 'function_call') throw new Error('no function call');
    expect(call.name).toBe('get_weather');
    expect(typeof (JSON.parse(call.arguments) as { city: unknown }).city).toBe('string');
    expect(call.call_id.length).toBeGreaterThan(0);
    const second = await alice.responses.create({
      model: MODEL,
      previous_response_id: first.id,
      instructions: INSTRUCTIONS,
      input: [{ type: 'function_call_output', call_id: call.call_id, output: '{"temp": 21}' }],
      tools: [WEATHER],
      max_output_tokens: 12,
      temperature: 0,
    });
    expect(second.output[0].type).toBe('message');
    expect(second.usage!.input_tokens_details.cached_tokens).toBeGreaterThanOrEqual(floorBlocks(first.usage!.input_tokens));
  });

  it('streams a forced function call as function_call_arguments events', async () => {
    const stream = await alice.responses.create({ model: MODEL, input: 'Weather?', tools: [WEATHER], tool_choice: 'required', max_output_tokens: 128, temperature: 0, stream: true });
    let args = '';
    let done = '';
    for await (const event of stream) {
      if (event.type === 'response.function_call_arguments.delta') args += event.delta;
      if (event.type === 'response.function_call_arguments.done') done = event.arguments;
    }
    expect(args).toBe(done);
    expect(JSON.parse(done)).toHaveProperty('city');
  });

  it('text.format json_schema: output_text parses and holds the schema', async () => {
    const schema = { type: 'object', properties: { answer: { type: 'string', maxLength: 10 }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['answer', 'n'], additionalProperties: false };
    for (const temperature of [0, 1]) {
      const r = await alice.responses.create({ model: MODEL, input: 'JSON please', text: { format: { type: 'json_schema', name: 'reply', schema, strict: true } }, max_output_tokens: 48, temperature });
      const parsed = JSON.parse(r.output_text) as { answer: string; n: number };
      expect(typeof parsed.answer).toBe('string');
      expect(Number.isInteger(parsed.n)).toBe(true);
      expect(r.status).toBe('completed');
    }
  });

  it('GET returns a stored response, DELETE removes it; store:false is not kept', async () => {
    const r = await alice.responses.create({ model: MODEL, input: 'Keep me', max_output_tokens: 4, temperature: 0 });
    const got = await alice.responses.retrieve(r.id);
    expect(got.id).toBe(r.id);
    expect(got.output_text).toBe(r.output_text);
    const deleted = (await alice.responses.delete(r.id)) as unknown;
    expect(deleted === undefined || (deleted as { deleted?: boolean }).deleted === true).toBe(true);
    await expect(alice.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    const unstored = await alice.responses.create({ model: MODEL, input: 'Forget me', max_output_tokens: 4, temperature: 0, store: false });
    await expect(alice.responses.retrieve(unstored.id)).rejects.toMatchObject({ status: 404 });
    await expect(alice.responses.create({ model: MODEL, input: 'x', previous_response_id: unstored.id, max_output_tokens: 4 })).rejects.toMatchObject({ status: 404 });
  });

  it("another tenant's response id is a 404 (GET, DELETE and previous_response_id)", async () => {
    const r = await alice.responses.create({ model: MODEL, input: 'Mine', max_output_tokens: 4, temperature: 0 });
    await expect(bob.responses.retrieve(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.responses.delete(r.id)).rejects.toMatchObject({ status: 404 });
    await expect(bob.responses.create({ model: MODEL, input: 'x', previous_response_id: r.id, max_output_tokens: 4 })).rejects.toMatchObject({ status: 404 });
    expect((await alice.responses.retrieve(r.id)).id).toBe(r.id);
  });

  it("a stored response expires with its traffic class's retention TTL", async () => {
    const edit = await fetch(`${server.url}/admin/policy/edit`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${ADMIN_TOKEN}` },
      body: JSON.stringify({ op: 'setClass', name: 'brief', ttlMs: 1000, create: true }),
    });
    expect(edit.status).toBe(200);
    const brief = await alice.responses.create({ model: MODEL, input: 'Short-lived', max_output_tokens: 4, temperature: 0, kvtier_class: 'brief' } as OpenAI.Responses.ResponseCreateParamsNonStreaming);
    const kept = await alice.responses.create({ model: MODEL, input: 'Long-lived', max_output_tokens: 4, temperature: 0 });
    expect((await alice.responses.retrieve(brief.id)).id).toBe(brief.id);
    clockAheadMs += 1001; // the store's clock moves past the 1 s TTL (the test waits for nothing)
    await expect(alice.responses.retrieve(brief.id)).rejects.toMatchObject({ status: 404 });
    await expect(alice.responses.create({ model: MODEL, input: 'x', previous_response_id: brief.id, max_output_tokens: 4 })).rejects.toMatchObject({ status: 404 });
    expect((await alice.responses.retrieve(kept.id)).id).toBe(kept.id);
  });

  it('bad input → 400 naming the field', async () => {
    const cases: Array<[unknown, string]> = [
      [{ model: MODEL, input: [{ role: 'wizard', content: 'x' }] }, 'input[0].role'],
      [{ model: MODEL, input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type'],
      [{ model: MODEL, input: [{ type: 'function_call_output', output: 'x' }] }, 'input[0].call_id'],
      [{ model: MODEL, input: [{ type: 'function_call', call_id: 'c', name: 'f' }] }, 'input[0].arguments'],
      [{ model: MODEL, input: [{ type: 'telepathy' }] }, 'input[0].type'],
      [{ model: MODEL, input: 'x', tools: [{ type: 'web_search' }] }, 'tools[0].type'],
      [{ model: MODEL, input: 'x', text: { format: { type: 'json_schema', name: 'x', schema: { type: 'string', pattern: '^a+$' } } } }, 'text.format.schema.pattern'],
      [{ model: MODEL, input: 'x', tool_choice: { type: 'function', name: 'nope' }, tools: [WEATHER] }, 'tool_choice'],
      [{ model: MODEL, input: 'x', max_output_tokens: 2, text: { format: { type: 'json_schema', name: 'x', schema: { type: 'string', minLength: 10 } } } }, 'max_output_tokens'],
      [{ model: MODEL, input: 'x', max_output_tokens: 10_000_000 }, 'max_output_tokens'],
      [{ model: MODEL }, 'input'],
    ];
    for (const [body, param] of cases) {
      const { status, json } = await post(body);
      expect({ param: json.error?.param, status }).toEqual({ param, status: 400 });
    }
  });
});
