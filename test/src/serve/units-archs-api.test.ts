/**
 * The new architectures of #26 served like `npm start` (embedded engine
 * thread, fs storage) through the OpenAI SDK:
 *   - gemma3-tiny: the block tier is on (whole pages hold every layer's K/V,
 *     an exact state): cached tokens grow every turn, and each turn's greedy
 *     reply equals the same conversation sent cold by another tenant;
 *   - lfm2-tiny (convolution state outside the pages): prefix units
 *     (src/scheduler/units.ts). Multi-turn chat and a tool loop: each turn's
 *     cached tokens are exactly the matched unit's length (the previous
 *     reply's end: the API keeps the reply's own tokens for the echoed
 *     assistant turn), the tails on storage are
 *     exactly the units written (end of every prompt and reply) with the
 *     size their sections need, and every reply equals the same
 *     conversation sent cold, a fresh tenant per request (0 cached).
 */
import { existsSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { readFileSync, writeFileSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';

import { loadEngine, unitShapeOf } from '../../../inference-core/engine/index.ts';
import { TailCodec } from '../../../src/kvtier/index.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const servers: TestServer[] = [];
afterAll(async () => {
  for (const s of servers) await s.close();
});

const SYSTEM = 'You are a terse assistant that keeps answers short. '.repeat(8);

async function conversation(modelPath: string): Promise<{ cached: number[]; replies: string[]; cold: string[]; server: TestServer }> {
  const server = await startTestServer({ model: modelPath });
  // the API names a GGUF model by its file name without .gguf
  const model = basename(modelPath, '.gguf');
  servers.push(server);
  const warm = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  const coldClient = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.bob, maxRetries: 0 });
  const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: hello' }];
  const cached: number[] = [];
  const replies: string[] = [];
  const cold: string[] = [];
  for (let turn = 1; turn <= 4; turn++) {
    const r = await warm.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    cached.push(r.usage!.prompt_tokens_details!.cached_tokens!);
    replies.push(r.choices[0].message.content ?? '');
    // the same conversation so far, as another tenant (its own namespace: nothing of alice's is hit)
    const c = await coldClient.chat.completions.create({ model, messages, max_tokens: 12, temperature: 0 });
    cold.push(c.choices[0].message.content ?? '');
    messages.push({ role: 'assistant', content: replies[turn - 1] });
    messages.push({ role: 'user', content: `Turn ${turn + 1}: and then?` });
  }
  return { cached, replies, cold, server };
}

function blockFiles(dir: string): string[] {
  if (!existsSync(dir)) return [];
  return readdirSync(dir, { withFileTypes: true }).flatMap((e) => (e.isDirectory() ? blockFiles(join(dir, e.name)) : [join(dir, e.name)]));
}

describe('new architectures through the API', () => {
  it('gemma3: cached tokens grow from turn 2, replies equal the cold ones', async () => {
    const model = ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR });
    const { cached, replies, cold } = await conversation(model);
    for (let i = 1; i < cached.length; i++) expect(cached[i]).toBeGreaterThan(cached[i - 1]);
    expect(replies).toEqual(cold);
  }, 180_000);

  it('lfm2: multi-turn chat and a tool loop hit exactly the matched unit each turn, tails on storage are the units written at their sizes, replies equal cold (fresh tenant per request)', async () => {
    const modelPath = ensureLfm2Model({ dataDir: TEST_DATA_DIR });
    const model = basename(modelPath, '.gguf');
    const dataDir = mkdtempSync(join(tmpdir(), 'kvtier-units-api-'));
    const coldKeys = Array.from({ length: 16 }, (_, i) => `sk-cold-${i}`);
    const keysFile = join(dataDir, 'units-keys.txt');
    writeFileSync(keysFile, `${KEYS.alice} alice\n${coldKeys.map((k, i) => `${k} cold-${i}`).join('\n')}\n`);
    const server = await startTestServer({ model: modelPath, dataDir, apiKeysFile: keysFile });
    let open = true;
    const closeServer = async () => {
      if (open) await server.close();
      open = false;
    };
    try {
    const alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    let coldUsed = 0;
    /** Unit positions written: the end of each prompt and of each reply (the last token is fed), alice's and the cold tenants'. */
    const written = new Set<number>();
    type Msg = OpenAI.Chat.Completions.ChatCompletionMessageParam;
    const turn = async (messages: Msg[], tools?: OpenAI.Chat.Completions.ChatCompletionTool[], previous?: { prompt: number; reply: number }) => {
      const r = await alice.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, ...(tools ? { tools } : {}) });
      const u = r.usage!;
      const cached = u.prompt_tokens_details!.cached_tokens!;
      if (!previous) expect(cached).toBe(0);
      // the longest unit whose whole prefix matches: the previous reply's end (the API keeps the reply's own tokens for the echoed assistant turn)
      else expect(cached).toBe(previous.prompt + previous.reply);
      written.add(u.prompt_tokens).add(u.prompt_tokens + u.completion_tokens);
      const cold = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: coldKeys[coldUsed++], maxRetries: 0 });
      const c = await cold.chat.completions.create({ model, messages, max_tokens: 10, temperature: 0, ...(tools ? { tools } : {}) });
      expect(c.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
      // a cold prompt may be a few tokens longer: the API keeps alice's own reply tokens for her echoed assistant turns (a fresh tenant has none)
      written.add(c.usage!.prompt_tokens).add(c.usage!.prompt_tokens + c.usage!.completion_tokens);
      expect(c.choices[0].message).toEqual(r.choices[0].message);
      return { reply: r.choices[0].message, prompt: u.prompt_tokens, completion: u.completion_tokens };
    };
    // multi-turn chat
    const chat: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: hello' }];
    let previous: { prompt: number; reply: number } | undefined;
    for (let i = 1; i <= 4; i++) {
      const t = await turn(chat, undefined, previous);
      previous = { prompt: t.prompt, reply: t.completion };
      chat.push({ role: 'assistant', content: t.reply.content ?? '' });
      chat.push({ role: 'user', content: `Turn ${i + 1}: and then?` });
    }
    // a tool loop: the assistant turn echoed as returned, a result for each call it made
    const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [{ type: 'function', function: { name: 'run_tests', description: 'Run the test suite', parameters: { type: 'object', properties: { filter: { type: 'string' } } } } }];
    const loop: Msg[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'The build is red, fix it.' }];
    previous = undefined;
    for (let step = 1; step <= 4; step++) {
      const t = await turn(loop, TOOLS, previous);
      previous = { prompt: t.prompt, reply: t.completion };
      const assistant: OpenAI.Chat.Completions.ChatCompletionAssistantMessageParam = { role: 'assistant', content: t.reply.content ?? '' };
      if (t.reply.tool_calls) assistant.tool_calls = t.reply.tool_calls;
      loop.push(assistant);
      for (const call of t.reply.tool_calls ?? []) loop.push({ role: 'tool', tool_call_id: call.id, content: `{"ok": false, "step": ${step}}` });
      loop.push({ role: 'user', content: `Step ${step + 1}: keep going.` });
    }
    // tails on storage: alice's positions (her namespace) and the cold tenants' (the same prompts), each at the size its sections need
    await closeServer();
    const engine = await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 4 * 2 ** 20 });
    const shape = unitShapeOf(engine);
    const kvPerToken = engine.kvBytesPerToken;
    const fingerprint = engine.fingerprint;
    engine.destroy();
    const codec = await TailCodec.create();
    const tails = blockFiles(join(server.dataDir, 'blocks'))
      .filter((f) => !f.endsWith('.tmp'))
      .map((f) => ({ f, bytes: readFileSync(f) }))
      .filter(({ bytes }) => bytes.readUInt32LE(0) === 0x5454564b)
      .map(({ bytes }) => ({ size: bytes.byteLength, tail: codec.decode(new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength)) }));
    const positions = new Set(tails.map((t) => t.tail.position));
    for (const p of written) expect(positions.has(p)).toBe(true);
    // besides those, only common-prefix units (units.ts): at a whole block, here the system prompt the chat and the tool loop share
    const detected = [...positions].filter((p) => !written.has(p));
    expect(detected.length).toBeGreaterThan(0);
    for (const p of detected) expect(p % 64).toBe(0);
    const conv = shape.conv!;
    const align = (v: number, to: number) => Math.ceil(v / to) * to;
    for (const { size, tail } of tails) {
      const r = tail.position % 64;
      const table = (r > 0 ? 16 + align(2 * shape.blockLayers.length, 4) : 0) + 16 + align(2 * conv.layers.length, 4);
      const header = align(align(112 + Buffer.byteLength(fingerprint), 4) + 4 * r + table, 64);
      expect(size).toBe(header + r * kvPerToken + conv.layers.length * conv.rows * conv.width * 4);
    }
    } finally {
      await closeServer();
    }
  }, 300_000);
});
