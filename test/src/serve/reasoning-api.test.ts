/**
 * Reasoning content end to end on real vocabularies and their templates
 * (tiny random weights, test/helpers/real-vocab-gguf.ts):
 *
 *   - DeepSeek R1's template (inference-core/synthetic/deepseek-r1-template.ts:
 *     V3's with the history's reasoning dropped and a generation prompt that
 *     opens `<think>\n`): the reply is reasoning until `</think>`, so it goes
 *     to message.reasoning_content / delta.reasoning_content (never to
 *     content), Anthropic `thinking` blocks when thinking is enabled (left
 *     out otherwise), a Responses `reasoning` item; streamed == not streamed;
 *     the next turn (content sent back, as DeepSeek asks) keeps the previous
 *     prompt cached up to the reply.
 *   - Qwen3: chat_template_kwargs {enable_thinking: false} reaches the
 *     template (its generation prompt gains the empty think block, the reply
 *     is content).
 */
import { basename } from 'node:path';

import Anthropic from '@anthropic-ai/sdk';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { buildRealVocabGguf } from '../../helpers/real-vocab-gguf.ts';
import { DEEPSEEK_R1_CHAT_TEMPLATE } from '../../../inference-core/synthetic/deepseek-r1-template.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectReasoningStream } from './reasoning-stream.ts';

const BLOCK = 64;
const SYSTEM = 'You are kvtier, a terse assistant. ' + 'Think first, then answer in one short line and cite the cache. '.repeat(8);
const floorBlocks = (n: number) => Math.floor(n / BLOCK) * BLOCK;

describe('DeepSeek R1 style template: the reply opens inside <think>', () => {
  let server: TestServer;
  let model: string;
  let openai: OpenAI;
  let anthropic: Anthropic;

  beforeAll(async () => {
    const path = buildRealVocabGguf('deepseek_v3', { chatTemplate: DEEPSEEK_R1_CHAT_TEMPLATE, variant: 'r1-think' });
    model = basename(path, '.gguf');
    server = await startTestServer({ model: path });
    openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    anthropic = new Anthropic({ baseURL: server.url, apiKey: KEYS.alice, maxRetries: 0 });
  }, 300_000);

  afterAll(async () => {
    await server?.close();
  });

  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [
    { role: 'system', content: SYSTEM },
    { role: 'user', content: 'What does a KV cache hold?' },
  ];

  it('chat completions: reasoning_content apart from content, streamed == not streamed', async () => {
    const r = await openai.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    const message = r.choices[0].message as OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };
    expect(typeof message.reasoning_content).toBe('string');
    expect(message.reasoning_content!.length).toBeGreaterThan(0);
    expect(message.reasoning_content).not.toContain('<think>');
    // Never closed in 12 tokens: every output token is a reasoning token.
    expect(r.usage!.completion_tokens_details?.reasoning_tokens).toBe(r.usage!.completion_tokens);

    const stream = await openai.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0, stream: true });
    const { reasoning, content } = await collectReasoningStream(stream);
    expect(reasoning).toBe(message.reasoning_content);
    expect(content).toBe(message.content ?? '');
  });

  it('a constrained reply (response_format) is content, not reasoning, even after the opened <think>', async () => {
    const r = await openai.chat.completions.create({ model, messages, max_tokens: 48, temperature: 0, response_format: { type: 'json_object' } });
    const message = r.choices[0].message as OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };
    expect(message.reasoning_content).toBeUndefined();
    expect(typeof JSON.parse(message.content!)).toBe('object');
  });

  it('/v1/completions returns the raw text: a prompt ending in <think> keeps its reply (no split there)', async () => {
    const r = await openai.completions.create({ model, prompt: '<｜User｜>What does a KV cache hold?<｜Assistant｜><think>\n', max_tokens: 8, temperature: 0 });
    expect(r.choices[0].text.length).toBeGreaterThan(0);
  });

  it('the next turn (content sent back without reasoning) keeps the previous prompt cached', async () => {
    const first = await openai.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    const next = await openai.chat.completions.create({
      model,
      messages: [...messages, { role: 'assistant', content: first.choices[0].message.content ?? '' }, { role: 'user', content: 'And then?' }],
      max_tokens: 12,
      temperature: 0,
    });
    // The previous prompt minus its generation prompt's `<think>\n` (the template renders history without it).
    expect(next.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThanOrEqual(floorBlocks(first.usage!.prompt_tokens - 2));
    expect(next.usage!.prompt_tokens_details!.cached_tokens).toBeGreaterThan(0);
  });

  it('Anthropic: thinking blocks when thinking is enabled (streamed and not), none otherwise', async () => {
    const params = { model, system: SYSTEM, messages: [{ role: 'user' as const, content: 'What does a KV cache hold?' }], max_tokens: 12, temperature: 0 };
    const on = await anthropic.messages.create({ ...params, thinking: { type: 'enabled', budget_tokens: 1024 } });
    const thinking = on.content.find((block) => block.type === 'thinking');
    expect(thinking).toBeDefined();
    expect(thinking!.type === 'thinking' && thinking!.thinking.length > 0).toBe(true);
    const off = await anthropic.messages.create(params);
    expect(off.content.some((block) => block.type === 'thinking')).toBe(false);

    const stream = anthropic.messages.stream({ ...params, thinking: { type: 'enabled', budget_tokens: 1024 } });
    let streamed = '';
    stream.on('thinking', (delta) => (streamed += delta));
    const final = await stream.finalMessage();
    expect(streamed).toBe(thinking!.type === 'thinking' ? thinking!.thinking : '');
    expect(final.content[0].type).toBe('thinking');
  });

  it('Responses: a reasoning item before the message, streamed as reasoning_text deltas', async () => {
    const r = await openai.responses.create({ model, instructions: SYSTEM, input: 'What does a KV cache hold?', max_output_tokens: 12, temperature: 0 });
    const item = r.output.find((o) => o.type === 'reasoning');
    expect(item?.type).toBe('reasoning');
    const text = item?.type === 'reasoning' ? (item.content ?? []).map((c) => c.text).join('') : '';
    expect(text.length).toBeGreaterThan(0);
    expect(r.output[0].type).toBe('reasoning');
    expect(r.usage!.output_tokens_details.reasoning_tokens).toBe(r.usage!.output_tokens);

    const stream = await openai.responses.create({ model, instructions: SYSTEM, input: 'What does a KV cache hold?', max_output_tokens: 12, temperature: 0, stream: true });
    let deltas = '';
    let textDeltas = '';
    for await (const event of stream) {
      if (event.type === 'response.reasoning_text.delta') deltas += event.delta;
      if (event.type === 'response.output_text.delta') textDeltas += event.delta;
    }
    expect(deltas).toBe(text);
    expect(textDeltas).toBe(r.output_text);

    // The SDK's stream helper accumulates the reasoning item from the same events.
    const helper = openai.responses.stream({ model, instructions: SYSTEM, input: 'What does a KV cache hold?', max_output_tokens: 12, temperature: 0 });
    const final = await helper.finalResponse();
    const reasoningItem = final.output.find((o) => o.type === 'reasoning');
    expect(reasoningItem?.type === 'reasoning' ? (reasoningItem.content ?? []).map((c) => c.text).join('') : null).toBe(text);
  });
});

describe('Qwen3: chat_template_kwargs reach the template', () => {
  let server: TestServer;
  let model: string;

  beforeAll(async () => {
    const path = buildRealVocabGguf('qwen3');
    model = basename(path, '.gguf');
    server = await startTestServer({ model: path });
  }, 300_000);

  afterAll(async () => {
    await server?.close();
  });

  it('enable_thinking false adds the empty think block to the prompt; the reply is content', async () => {
    const ask = async (kwargs?: Record<string, unknown>) => {
      const res = await fetch(`${server.url}/v1/chat/completions`, {
        method: 'POST',
        headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
        body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 6, temperature: 0, ...(kwargs ? { chat_template_kwargs: kwargs } : {}) }),
      });
      expect(res.status).toBe(200);
      return (await res.json()) as { usage: { prompt_tokens: number }; choices: Array<{ message: { content: string; reasoning_content?: string } }> };
    };
    const plain = await ask();
    const off = await ask({ enable_thinking: false });
    // `<think>\n\n</think>\n\n` after the generation prompt: <think>, \n\n, </think>, \n\n.
    expect(off.usage.prompt_tokens - plain.usage.prompt_tokens).toBe(4);
    expect(off.choices[0].message.reasoning_content).toBeUndefined();
    expect((off.usage as { completion_tokens_details?: unknown }).completion_tokens_details).toBeUndefined();
    // Qwen3's top-level switch and an explicit Anthropic thinking: disabled say the same.
    const topLevel = await fetch(`${server.url}/v1/chat/completions`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 6, temperature: 0, enable_thinking: false }),
    });
    expect(((await topLevel.json()) as { usage: { prompt_tokens: number } }).usage.prompt_tokens).toBe(off.usage.prompt_tokens);
    const anthropic = await fetch(`${server.url}/v1/messages`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', 'x-api-key': KEYS.alice },
      body: JSON.stringify({ model, messages: [{ role: 'user', content: 'Hi there' }], max_tokens: 6, temperature: 0, thinking: { type: 'disabled' } }),
    });
    const u = ((await anthropic.json()) as { usage: Record<string, number> }).usage;
    expect(u.input_tokens + u.cache_read_input_tokens + u.cache_creation_input_tokens).toBe(off.usage.prompt_tokens);
  });

  it('reasoning sent back inside a tool loop is rendered where Qwen3 expects it, the same from every API', async () => {
    const post = async (route: string, body: Record<string, unknown>) => {
      const res = await fetch(`${server.url}${route}`, { method: 'POST', headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS.alice}` }, body: JSON.stringify({ model, temperature: 0, ...body }) });
      const json = (await res.json()) as Record<string, unknown>;
      expect(res.status, JSON.stringify(json)).toBe(200);
      return json as { usage: Record<string, number> };
    };
    const tools = [{ type: 'function', function: { name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } } }];
    const call = { id: 'call_1', type: 'function', function: { name: 'get_weather', arguments: '{"city": "Paris"}' } };
    const chat = async (assistant: Record<string, unknown>) =>
      (await post('/v1/chat/completions', { messages: [{ role: 'user', content: 'Weather in Paris?' }, { role: 'assistant', tool_calls: [call], ...assistant }, { role: 'tool', tool_call_id: 'call_1', content: 'sunny' }], tools, max_tokens: 4 })).usage.prompt_tokens;
    const withField = await chat({ content: null, reasoning_content: 'Need the tool.' });
    const inContent = await chat({ content: '<think>\nNeed the tool.\n</think>\n\n' });
    const without = await chat({ content: null });
    // The template's own extraction from the content and the field render the same; dropping it shortens the prompt.
    expect(withField).toBe(inContent);
    expect(withField).toBeGreaterThan(without);

    const anthropic = await post('/v1/messages', {
      max_tokens: 4,
      tools: [{ name: 'get_weather', description: 'Weather of a city', input_schema: { type: 'object', properties: { city: { type: 'string' } } } }],
      messages: [
        { role: 'user', content: 'Weather in Paris?' },
        { role: 'assistant', content: [{ type: 'thinking', thinking: 'Need the tool.', signature: '' }, { type: 'tool_use', id: 'call_1', name: 'get_weather', input: { city: 'Paris' } }] },
        { role: 'user', content: [{ type: 'tool_result', tool_use_id: 'call_1', content: 'sunny' }] },
      ],
    });
    const a = anthropic.usage;
    expect(a.input_tokens + a.cache_read_input_tokens + a.cache_creation_input_tokens).toBe(withField);

    const responses = await post('/v1/responses', {
      max_output_tokens: 4,
      tools: [{ type: 'function', name: 'get_weather', description: 'Weather of a city', parameters: { type: 'object', properties: { city: { type: 'string' } } } }],
      input: [
        { role: 'user', content: 'Weather in Paris?' },
        { type: 'reasoning', summary: [], content: [{ type: 'reasoning_text', text: 'Need the tool.' }] },
        { type: 'function_call', call_id: 'call_1', name: 'get_weather', arguments: '{"city": "Paris"}' },
        { type: 'function_call_output', call_id: 'call_1', output: 'sunny' },
      ],
    });
    expect(responses.usage.input_tokens).toBe(withField);
  });
});
