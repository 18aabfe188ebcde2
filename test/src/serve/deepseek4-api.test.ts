/**
 * synthetic:deepseek4-tiny (DeepSeek V4: hyper-connections, CSA/HCA
 * compression, lightning indexer, SWA; DeepSeek-V3's vocabulary and V4's chat
 * template) served like `npm start` (embedded engine thread, fs storage),
 * driven by the OpenAI SDK, cached by prefix units (#26: its state at a position
 * is not a chain of 64-token blocks; inference-core/engine/deepseek4-unit.ts):
 *
 *   - a multi-turn chat and a tool loop with client-written assistant turns
 *     (tool calls rendered as V4's DSML blocks, results as <tool_result>),
 *     sent warm (one tenant, every turn) and cold (other tenants): the same
 *     prompt lengths and identical greedy replies; each warm turn after the
 *     first hits exactly the unit at the previous prompt's end, and units
 *     (blocks and tails) are on storage (units-archs-api.test.ts checks
 *     their sizes and fresh-tenant replies);
 *   - reasoning: thinking on (chat_template_kwargs) opens the reply inside
 *     <think>, so it reaches reasoning_content, streamed == not streamed;
 *   - JSON Schema output parses and validates; the Responses API answers and
 *     chains by previous_response_id.
 */
import { existsSync, readdirSync } from 'node:fs';
import { join } from 'node:path';
import Ajv from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { collectReasoningStream } from './reasoning-stream.ts';

const MODEL = 'synthetic:deepseek4-tiny';
const SYSTEM = 'You are kvtier on DeepSeek V4, a terse assistant. ' + 'Answer in one short line. '.repeat(6);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];

type Message = OpenAI.Chat.Completions.ChatCompletionMessage & { reasoning_content?: string };
type Params = OpenAI.Chat.Completions.ChatCompletionMessageParam;

let server: TestServer;
let warm: OpenAI;
let coldTenants: OpenAI[];

beforeAll(async () => {
  server = await startTestServer({ model: MODEL });
  warm = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  // every cold request goes to a tenant that has not seen this conversation's last turns
  coldTenants = [KEYS.bob, KEYS.sharedOne, KEYS.sharedTwo].map((apiKey) => new OpenAI({ baseURL: `${server.url}/v1`, apiKey, maxRetries: 0 }));
}, 300_000);

afterAll(async () => {
  await server?.close();
});

function blockFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? blockFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

interface Turn {
  prompt: number;
  cached: number;
  reply: string;
}

async function ask(client: OpenAI, messages: Params[], tools?: OpenAI.Chat.Completions.ChatCompletionTool[]): Promise<Turn> {
  const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 10, temperature: 0, ...(tools ? { tools } : {}) });
  return { prompt: r.usage!.prompt_tokens, cached: r.usage!.prompt_tokens_details?.cached_tokens ?? 0, reply: r.choices[0].message.content ?? '' };
}

describe('DeepSeek V4 (synthetic:deepseek4-tiny) through the API, with prefix units', () => {
  it('multi-turn: warm and cold give the same prompt lengths and greedy replies; warm turns hit the previous prompt\'s unit', async () => {
    const messages: Params[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what does the indexer choose?' }];
    let previous = 0;
    for (let turn = 1; turn <= 4; turn++) {
      const w = await ask(warm, messages);
      const c = await ask(coldTenants[turn % coldTenants.length]!, messages);
      expect(c.prompt, `turn ${turn}`).toBe(w.prompt);
      expect(c.reply, `turn ${turn}`).toBe(w.reply);
      // a first turn may only hit a detected common-prefix unit (a whole block)
      if (turn === 1) expect(w.cached % 64, `turn ${turn}`).toBe(0);
      else expect(w.cached, `turn ${turn}`).toBe(previous);
      previous = w.prompt;
      expect(w.reply.length, `turn ${turn}`).toBeGreaterThan(0);
      // client-written (not the model's reply: the API would swap a remembered reply's own token ids in for the warm tenant)
      messages.push({ role: 'assistant', content: `Answer ${turn}: the indexer keeps the top entries of the compressed cache.` });
      messages.push({ role: 'user', content: `Turn ${turn + 1}: and then? ` + 'Keep it short. '.repeat(4) });
    }
  }, 300_000);

  it('a tool loop with client-written tool calls: warm and cold agree, the prompt grows by the DSML call and result', async () => {
    const messages: Params[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Read the config and fix it.' }];
    let previous = 0;
    for (let step = 1; step <= 3; step++) {
      const w = await ask(warm, messages, TOOLS);
      const c = await ask(coldTenants[step % coldTenants.length]!, messages, TOOLS);
      expect(c.prompt, `step ${step}`).toBe(w.prompt);
      expect(c.reply, `step ${step}`).toBe(w.reply);
      expect(w.prompt, `step ${step}`).toBeGreaterThan(previous);
      if (step > 1) expect(w.cached, `step ${step}`).toBe(previous);
      previous = w.prompt;
      const id = `call_${step}`;
      messages.push({ role: 'assistant', content: null, tool_calls: [{ id, type: 'function', function: { name: 'read_file', arguments: JSON.stringify({ path: `config-${step}.toml` }) } }] });
      messages.push({ role: 'tool', tool_call_id: id, content: `{"ok": true, "step": ${step}}` });
    }
    expect(blockFiles(join(server.dataDir, 'blocks')).filter((f) => !f.endsWith('.tmp')).length).toBeGreaterThan(0);
  }, 300_000);

  it('reasoning: thinking on puts the reply in reasoning_content, streamed == not streamed; off is content', async () => {
    const messages: Params[] = [{ role: 'user', content: 'What does a KV cache hold?' }];
    const body = { model: MODEL, messages, max_tokens: 8, temperature: 0, chat_template_kwargs: { thinking: true } };
    const r = await warm.chat.completions.create(body as OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming);
    const message = r.choices[0].message as Message;
    expect(message.reasoning_content?.length ?? 0).toBeGreaterThan(0);
    expect(message.reasoning_content).not.toContain('<think>');
    const stream = await warm.chat.completions.create({ ...body, stream: true } as OpenAI.Chat.Completions.ChatCompletionCreateParamsStreaming);
    const { reasoning, content } = await collectReasoningStream(stream);
    expect(reasoning).toBe(message.reasoning_content);
    expect(content).toBe(message.content ?? '');
    const off = await warm.chat.completions.create({ model: MODEL, messages, max_tokens: 8, temperature: 0 });
    expect((off.choices[0].message as Message).reasoning_content).toBeUndefined();
    expect(off.choices[0].message.content?.length ?? 0).toBeGreaterThan(0);
  }, 300_000);

  it('JSON Schema output parses and validates', async () => {
    const schema = { type: 'object', properties: { ok: { type: 'boolean' }, n: { type: 'integer', minimum: 0, maximum: 9 } }, required: ['ok', 'n'], additionalProperties: false };
    const r = await warm.chat.completions.create({
      model: MODEL,
      messages: [{ role: 'user', content: 'Answer in JSON.' }],
      max_tokens: 24,
      temperature: 0,
      response_format: { type: 'json_schema', json_schema: { name: 'reply', schema, strict: true } },
    });
    const validate = new Ajv().compile(schema);
    expect(validate(JSON.parse(r.choices[0].message.content ?? ''))).toBe(true);
    expect(r.choices[0].finish_reason).toBe('stop');
  }, 300_000);

  it('the Responses API answers and chains by previous_response_id', async () => {
    const first = await warm.responses.create({ model: MODEL, input: 'What is DeepSeek V4?', max_output_tokens: 8, temperature: 0 });
    expect(first.object).toBe('response');
    expect(first.output_text.length).toBeGreaterThan(0);
    const second = await warm.responses.create({ model: MODEL, previous_response_id: first.id, input: 'And then?', max_output_tokens: 8, temperature: 0 });
    expect(second.output_text.length).toBeGreaterThan(0);
    expect(second.usage!.input_tokens).toBeGreaterThan(first.usage!.input_tokens + first.usage!.output_tokens);
  }, 300_000);
});
