/**
 * The API end to end on the embedded default (engine thread, fs storage,
 * synthetic:tiny), driven by the official OpenAI and Anthropic SDKs.
 */
import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { runAgentLoop } from './agent-loop.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const BLOCK = 64;
let server: TestServer;
let alice: OpenAI;

const SYSTEM = 'You are kvtier, a terse assistant. ' + 'Answer in one short line, cite the cache, never apologise. '.repeat(12);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file of the repository', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
  { type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } },
];

beforeAll(async () => {
  server = await startTestServer();
  alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
});

afterAll(async () => {
  await server?.close();
});

function floorBlocks(tokens: number): number {
  return Math.floor(tokens / BLOCK) * BLOCK;
}

async function adminGet(path: string): Promise<Response> {
  return fetch(`${server.url}${path}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
}

describe('OpenAI SDK', () => {
  it('chat completion with cache usage fields', async () => {
    const response = await alice.chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'Hello there' }], max_tokens: 8, temperature: 0 });
    expect(response.object).toBe('chat.completion');
    expect(response.choices[0].message.role).toBe('assistant');
    expect(typeof response.choices[0].message.content).toBe('string');
    expect(['stop', 'length']).toContain(response.choices[0].finish_reason);
    const usage = response.usage as OpenAI.CompletionUsage & { prompt_cache_hit_tokens: number; prompt_cache_miss_tokens: number };
    expect(usage.prompt_tokens).toBeGreaterThan(0);
    expect(usage.completion_tokens).toBeGreaterThan(0);
    expect(usage.prompt_tokens_details?.cached_tokens).toBe(usage.prompt_cache_hit_tokens);
    expect(usage.prompt_cache_hit_tokens + usage.prompt_cache_miss_tokens).toBe(usage.prompt_tokens);
  });

  it('streams chunks, then usage when include_usage is set, then [DONE]', async () => {
    const stream = await alice.chat.completions.create({
      model: 'synthetic:tiny',
      messages: [{ role: 'user', content: 'Stream me something' }],
      max_tokens: 12,
      temperature: 0,
      stream: true,
      stream_options: { include_usage: true },
    });
    let text = '';
    let finish: string | null = null;
    let usage: OpenAI.CompletionUsage | undefined;
    let chunks = 0;
    for await (const chunk of stream) {
      chunks++;
      if (chunk.choices[0]?.delta?.content) text += chunk.choices[0].delta.content;
      if (chunk.choices[0]?.finish_reason) finish = chunk.choices[0].finish_reason;
      if (chunk.usage) usage = chunk.usage;
    }
    expect(chunks).toBeGreaterThan(2);
    expect(finish).not.toBeNull();
    expect(usage?.completion_tokens).toBeGreaterThan(0);
    const plain = await alice.chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'Stream me something' }], max_tokens: 12, temperature: 0 });
    expect(text).toBe(plain.choices[0].message.content);
  });

  it('legacy completions, streamed and not', async () => {
    const plain = await alice.completions.create({ model: 'synthetic:tiny', prompt: 'The cache tier', max_tokens: 6, temperature: 0 });
    expect(plain.object).toBe('text_completion');
    expect(plain.usage?.prompt_tokens).toBeGreaterThan(0);
    const stream = await alice.completions.create({ model: 'synthetic:tiny', prompt: 'The cache tier', max_tokens: 6, temperature: 0, stream: true });
    let text = '';
    for await (const chunk of stream) text += chunk.choices[0]?.text ?? '';
    expect(text).toBe(plain.choices[0].text);
  });

  it('lists the served model', async () => {
    const models = await alice.models.list();
    expect(models.data.map((m) => m.id)).toEqual(['synthetic:tiny']);
  });
});

describe('Anthropic SDK', () => {
  const anthropic = () => new Anthropic({ baseURL: server.url, apiKey: KEYS.alice, maxRetries: 0 });

  it('messages with cache usage fields', async () => {
    const message = await anthropic().messages.create({ model: 'synthetic:tiny', max_tokens: 8, system: SYSTEM, messages: [{ role: 'user', content: 'Hi' }] });
    expect(message.type).toBe('message');
    expect(message.content[0].type).toBe('text');
    expect(['end_turn', 'max_tokens']).toContain(message.stop_reason);
    const u = message.usage;
    expect(u.output_tokens).toBeGreaterThan(0);
    // A fresh prompt: nothing read, its full blocks written.
    expect(u.cache_read_input_tokens).toBe(0);
    expect(u.cache_creation_input_tokens).toBeGreaterThan(0);
    const again = await anthropic().messages.create({ model: 'synthetic:tiny', max_tokens: 8, system: SYSTEM, messages: [{ role: 'user', content: 'Hi' }] });
    // The same prompt again continues the retained sequence: all but the last token (which gives the logits) is read.
    expect(again.usage.cache_read_input_tokens).toBe(u.input_tokens + (u.cache_creation_input_tokens ?? 0) - 1);
    expect(again.usage.cache_read_input_tokens).toBeGreaterThanOrEqual(u.cache_creation_input_tokens ?? 0);
    expect(again.usage.cache_creation_input_tokens).toBe(0);
    expect(again.usage.input_tokens + (again.usage.cache_read_input_tokens ?? 0)).toBe(u.input_tokens + (u.cache_creation_input_tokens ?? 0));
    expect(again.content).toEqual(message.content);
  });

  it('streams message_start … message_stop with usage', async () => {
    const stream = anthropic().messages.stream({ model: 'synthetic:tiny', max_tokens: 10, messages: [{ role: 'user', content: 'Stream please' }] });
    const types: string[] = [];
    for await (const event of stream) types.push(event.type);
    const final = await stream.finalMessage();
    expect(types[0]).toBe('message_start');
    expect(types).toContain('content_block_start');
    expect(types).toContain('content_block_stop');
    expect(types).toContain('message_delta');
    expect(types[types.length - 1]).toBe('message_stop');
    expect(final.usage.output_tokens).toBeGreaterThan(0);
    const plain = await anthropic().messages.create({ model: 'synthetic:tiny', max_tokens: 10, messages: [{ role: 'user', content: 'Stream please' }] });
    expect(final.content).toEqual(plain.content);
  });
});

describe('multi-turn cache hits', () => {
  it('a 10-turn conversation hits its whole history from turn 2 on', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what is a KV cache?' }];
    let previousTotal = 0;
    for (let turn = 1; turn <= 10; turn++) {
      const response = await alice.chat.completions.create({ model: 'synthetic:tiny', messages, max_tokens: 24, temperature: 0, seed: 7 });
      const usage = response.usage!;
      if (turn > 1) expect(usage.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(floorBlocks(previousTotal));
      previousTotal = usage.prompt_tokens + usage.completion_tokens;
      messages.push({ role: 'assistant', content: response.choices[0].message.content ?? '' });
      messages.push({ role: 'user', content: `Turn ${turn + 1}: and what follows from that?` });
    }
  });

  it('a 10-step agent loop with tools and tool results hits its whole history', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'The build is red, fix it.' }];
    await runAgentLoop({ client: alice, model: 'synthetic:tiny', tools: TOOLS, messages, steps: 10, maxTokens: 20, floorBlocks }, {
      toolResult: (step) => `{"ok": false, "failing": "test/step-${step}.test.ts"}`,
      nextUser: (step) => `Step ${step + 1}: keep going.`,
    });
    // Requests with tools are traffic class agent: their blocks are accounted under it.
    const stats = (await (await adminGet('/admin/stats')).json()) as { tier: { usage: { blocks: Record<string, number> } } };
    expect(stats.tier.usage.blocks['c:agent']).toBeGreaterThan(0);
  });
});

describe('tenants and correctness', () => {
  const prompt = [{ role: 'system' as const, content: SYSTEM }, { role: 'user' as const, content: 'Isolation check, same words for everyone.' }];

  it('another tenant never hits the first tenant\'s blocks', async () => {
    const bob = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
    const first = await alice.chat.completions.create({ model: 'synthetic:tiny', messages: prompt, max_tokens: 4, temperature: 0 });
    const aliceAgain = await alice.chat.completions.create({ model: 'synthetic:tiny', messages: prompt, max_tokens: 4, temperature: 0 });
    const bobFirst = await bob.chat.completions.create({ model: 'synthetic:tiny', messages: prompt, max_tokens: 4, temperature: 0 });
    expect(first.usage!.prompt_tokens).toBeGreaterThan(BLOCK);
    // Alice's repeat continues her retained sequence (all but the last token); Bob's salt shares nothing with it.
    expect(aliceAgain.usage!.prompt_tokens_details!.cached_tokens).toBe(first.usage!.prompt_tokens - 1);
    expect(bobFirst.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
    // Output with the cache equals output without it (greedy).
    expect(aliceAgain.choices[0].message.content).toBe(first.choices[0].message.content);
    expect(bobFirst.choices[0].message.content).toBe(first.choices[0].message.content);
  });

  it('keys flagged shared share one namespace', async () => {
    const one = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.sharedOne, maxRetries: 0 });
    const two = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.sharedTwo, maxRetries: 0 });
    const shared = [{ role: 'system' as const, content: SYSTEM }, { role: 'user' as const, content: 'Shared namespace check.' }];
    await one.chat.completions.create({ model: 'synthetic:tiny', messages: shared, max_tokens: 2, temperature: 0 });
    const hit = await two.chat.completions.create({ model: 'synthetic:tiny', messages: shared, max_tokens: 2, temperature: 0 });
    expect(hit.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
  });

  it('sampling with a seed is reproducible with and without cache hits', async () => {
    const ask = (key: string) =>
      new OpenAI({ baseURL: `${server.url}/v1`, apiKey: key, maxRetries: 0 }).chat.completions.create({ model: 'synthetic:tiny', messages: prompt, max_tokens: 16, temperature: 0.8, top_p: 0.9, seed: 42 });
    const cold = await ask(KEYS.bob);
    const warm = await ask(KEYS.bob);
    expect(warm.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
    expect(warm.choices[0].message.content).toBe(cold.choices[0].message.content);
  });
});

describe('bad input', () => {
  const post = (path: string, body: unknown, headers: Record<string, string> = {}) =>
    fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}`, ...headers }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  const chat = { model: 'synthetic:tiny', messages: [{ role: 'user', content: 'x' }], max_tokens: 2 };
  const anthropicBody = { model: 'synthetic:tiny', max_tokens: 2, messages: [{ role: 'user', content: 'x' }] };

  const cases: Array<{ name: string; path: string; body: unknown; headers?: Record<string, string>; status: number; code: string; param?: string }> = [
    { name: 'malformed JSON (chat)', path: '/v1/chat/completions', body: '{"model":', status: 400, code: 'KVT_ERR_REQUEST_BAD_JSON' },
    { name: 'malformed JSON (messages)', path: '/v1/messages', body: '{nope', status: 400, code: 'KVT_ERR_REQUEST_BAD_JSON' },
    { name: 'malformed JSON (completions)', path: '/v1/completions', body: '[', status: 400, code: 'KVT_ERR_REQUEST_BAD_JSON' },
    { name: 'missing messages', path: '/v1/chat/completions', body: { model: 'synthetic:tiny' }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages' },
    { name: 'bad role', path: '/v1/chat/completions', body: { ...chat, messages: [{ role: 'wizard', content: 'x' }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages[0].role' },
    { name: 'temperature out of range', path: '/v1/chat/completions', body: { ...chat, temperature: 9 }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'temperature' },
    { name: 'max_tokens not an integer', path: '/v1/chat/completions', body: { ...chat, max_tokens: 'many' }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'max_tokens' },
    { name: 'too many max_tokens', path: '/v1/chat/completions', body: { ...chat, max_tokens: 100000 }, status: 400, code: 'KVT_ERR_REQUEST_MAX_TOKENS', param: 'max_tokens' },
    { name: 'prompt longer than the context', path: '/v1/chat/completions', body: { ...chat, messages: [{ role: 'user', content: 'lorem ipsum '.repeat(3000) }] }, status: 400, code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: 'messages' },
    { name: 'unknown model', path: '/v1/chat/completions', body: { ...chat, model: 'gpt-9' }, status: 404, code: 'KVT_ERR_REQUEST_UNKNOWN_MODEL', param: 'model' },
    { name: 'unknown class (body)', path: '/v1/chat/completions', body: { ...chat, kvtier_class: 'batch' }, status: 400, code: 'KVT_ERR_REQUEST_UNKNOWN_CLASS', param: 'kvtier_class' },
    { name: 'unknown class (header)', path: '/v1/chat/completions', body: chat, headers: { 'x-kvtier-class': 'nightly' }, status: 400, code: 'KVT_ERR_REQUEST_UNKNOWN_CLASS', param: 'x-kvtier-class' },
    { name: 'tool message without id', path: '/v1/chat/completions', body: { ...chat, messages: [{ role: 'tool', content: 'r' }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages[0].tool_call_id' },
    { name: 'image part', path: '/v1/chat/completions', body: { ...chat, messages: [{ role: 'user', content: [{ type: 'image_url' }] }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages[0].content[0].type' },
    { name: 'n > 1', path: '/v1/chat/completions', body: { ...chat, n: 2 }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'n' },
    { name: 'no API key', path: '/v1/chat/completions', body: chat, headers: { authorization: '' }, status: 401, code: 'KVT_ERR_AUTH_MISSING_KEY' },
    { name: 'unknown API key', path: '/v1/chat/completions', body: chat, headers: { authorization: 'Bearer sk-nobody' }, status: 401, code: 'KVT_ERR_AUTH_BAD_KEY' },
    { name: 'completions without prompt', path: '/v1/completions', body: { model: 'synthetic:tiny' }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'prompt' },
    { name: 'completions token out of vocab', path: '/v1/completions', body: { model: 'synthetic:tiny', prompt: [1, 2, 999999] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'prompt' },
    { name: 'messages without max_tokens', path: '/v1/messages', body: { model: 'synthetic:tiny', messages: [{ role: 'user', content: 'x' }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'max_tokens' },
    { name: 'messages with a system role inside', path: '/v1/messages', body: { ...anthropicBody, messages: [{ role: 'system', content: 'x' }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages[0].role' },
    { name: 'messages unknown block', path: '/v1/messages', body: { ...anthropicBody, messages: [{ role: 'user', content: [{ type: 'image' }] }] }, status: 400, code: 'KVT_ERR_REQUEST_INVALID', param: 'messages[0].content[0].type' },
    { name: 'messages unknown model', path: '/v1/messages', body: { ...anthropicBody, model: 'claude-x' }, status: 404, code: 'KVT_ERR_REQUEST_UNKNOWN_MODEL', param: 'model' },
    { name: 'unknown route', path: '/v1/embeddings', body: {}, status: 404, code: 'KVT_ERR_ROUTE_NOT_FOUND' },
  ];

  for (const c of cases) {
    it(`${c.name} → ${c.status} ${c.code}`, async () => {
      const headers = { ...(c.headers ?? {}) };
      const response = await post(c.path, c.body, headers);
      expect(response.status).toBe(c.status);
      const json = (await response.json()) as { error: { code: string; param: string | null; message: string; type: string }; type?: string };
      expect(json.error.code).toBe(c.code);
      expect(json.error.message.length).toBeGreaterThan(0);
      if (c.param) {
        expect(json.error.param).toBe(c.param);
        expect(json.error.message).toContain(c.param.split('.')[0].replace(/\[\d+\]$/, ''));
      }
      if (c.path === '/v1/messages') expect(json.type).toBe('error');
    });
  }

  it('keeps serving after all of that', async () => {
    const ok = await alice.chat.completions.create({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'still there?' }], max_tokens: 2 });
    expect(ok.choices).toHaveLength(1);
  });
});

describe('admin, health and metrics', () => {
  it('guards /admin/* with the admin token', async () => {
    expect((await fetch(`${server.url}/admin/stats`)).status).toBe(401);
    expect((await fetch(`${server.url}/admin/stats`, { headers: { authorization: 'Bearer wrong' } })).status).toBe(401);
    const stats = await adminGet('/admin/stats');
    expect(stats.status).toBe(200);
    const body = (await stats.json()) as { tier: { cache: { lookups: number } } };
    expect(body.tier.cache.lookups).toBeGreaterThan(0);
  });

  it('reads and changes the retention policy; a new class is usable at once', async () => {
    const policy = (await (await adminGet('/admin/policy')).json()) as { classes: Record<string, { ttlMs: number }> };
    expect(Object.keys(policy.classes).sort()).toEqual(['agent', 'chat']);
    const put = (body: unknown) => fetch(`${server.url}/admin/policy`, { method: 'PUT', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
    const bad = await put({ classes: { chat: { ttlMs: -5 } } });
    expect(bad.status).toBe(400);
    const good = await put({ classes: { batch: { ttlMs: 3_600_000 } } });
    expect(good.status).toBe(200);
    expect(((await good.json()) as { classes: Record<string, unknown> }).classes.batch).toEqual({ ttlMs: 3_600_000 });
    const response = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}`, 'x-kvtier-class': 'batch' },
      body: JSON.stringify({ model: 'synthetic:tiny', messages: [{ role: 'user', content: 'batch job' }], max_tokens: 2 }),
    });
    expect(response.status).toBe(200);
  });

  it('healthz, readyz and metrics answer', async () => {
    expect((await fetch(`${server.url}/healthz`)).status).toBe(200);
    expect((await fetch(`${server.url}/readyz`)).status).toBe(200);
    const metrics = await (await fetch(`${server.url}/metrics`)).text();
    for (const name of [
      'kvtier_requests_total',
      'kvtier_prompt_tokens_total{result="hit"}',
      'kvtier_prompt_cache_hit_ratio',
      'kvtier_time_to_first_token_seconds_bucket',
      'kvtier_time_per_output_token_seconds_bucket',
      'kvtier_prefill_tokens_total',
      'kvtier_decode_tokens_total',
      'kvtier_storage_bytes_total{direction="written"}',
      'kvtier_gc_removed_blocks_total',
      'kvtier_queue_depth',
      'kvtier_errors_total{code="KVT_ERR_REQUEST_BAD_JSON"}',
    ]) {
      expect(metrics).toContain(name);
    }
  });
});
