/**
 * A DeepSeek-shaped model (synthetic:deepseek-tiny: deepseek2, MLA + MoE)
 * served like `npm start` (embedded engine thread, fs storage), driven by the
 * OpenAI SDK: a multi-turn chat and a tool loop whose cached tokens grow
 * every turn, and the blocks on storage are latent ("mla") blocks of the
 * expected size (layers · 64 · (kv_lora_rank + rope) · 2 bytes of payload).
 */
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { BlockCodec } from '../../../src/kvtier/index.ts';
import { runAgentLoop } from './agent-loop.ts';
import { ADMIN_TOKEN, KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const MODEL = 'synthetic:deepseek-tiny';
const BLOCK = 64;
/** deepseek-tiny (v3 shape): 3 layers, kv_lora_rank 64, rope 16, f16 KV. */
const MLA_BLOCK_BYTES = 3 * 64 * (64 + 16) * 2;
const SYSTEM = 'You are kvtier on DeepSeek, a terse assistant. ' + 'Answer in one short line, cite the cache. '.repeat(12);
const TOOLS: OpenAI.Chat.Completions.ChatCompletionTool[] = [
  { type: 'function', function: { name: 'read_file', description: 'Read a file', parameters: { type: 'object', properties: { path: { type: 'string' } }, required: ['path'] } } },
];

let server: TestServer;
let client: OpenAI;

beforeAll(async () => {
  server = await startTestServer({ model: MODEL });
  client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
}, 120_000);

afterAll(async () => {
  await server?.close();
});

const floorBlocks = (n: number) => Math.floor(n / BLOCK) * BLOCK;

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

describe('DeepSeek (MLA) through the API', () => {
  it('multi-turn chat: cached tokens cover the whole previous history from turn 2 on', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what is MLA?' }];
    let previousTotal = 0;
    let previousCached = -1;
    for (let turn = 1; turn <= 5; turn++) {
      const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 16, temperature: 0 });
      const usage = r.usage!;
      const cached = usage.prompt_tokens_details!.cached_tokens!;
      if (turn > 1) {
        expect(cached).toBeGreaterThanOrEqual(floorBlocks(previousTotal));
        expect(cached).toBeGreaterThan(previousCached);
      }
      previousCached = cached;
      previousTotal = usage.prompt_tokens + usage.completion_tokens;
      messages.push({ role: 'assistant', content: r.choices[0].message.content ?? '' });
      messages.push({ role: 'user', content: `Turn ${turn + 1}: and then?` });
    }
  });

  it('a tool loop hits its history every step', async () => {
    const messages: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Read the config and fix it.' }];
    await runAgentLoop({ client, model: MODEL, tools: TOOLS, messages, steps: 5, maxTokens: 16, floorBlocks }, {
      toolResult: (step) => `{"path": "config-${step}.toml", "ok": true}`,
      nextUser: (step) => `Step ${step + 1}: continue.`,
    });
  });

  it('the blocks on storage are mla blocks of the latent size', async () => {
    const codec = await BlockCodec.create();
    const decodeAll = () =>
      files(join(server.dataDir, 'blocks'))
        .map((f) => {
          try {
            return codec.decode(new Uint8Array(readFileSync(f)));
          } catch {
            return null; // a block still being written (temp file)
          }
        })
        .filter((b) => b !== null);
    // the writes are write-behind: wait until some are on storage
    let blocks = decodeAll();
    for (let i = 0; i < 100 && blocks.length === 0; i++) {
      await new Promise((r) => setTimeout(r, 50));
      blocks = decodeAll();
    }
    expect(blocks.length).toBeGreaterThan(0);
    for (const b of blocks) {
      expect(b!.layout).toMatchObject({ kind: 'mla', layers: 3, kvHeads: 1, headDim: 80, dtype: 'f16', tokensPerBlock: 64 });
      expect(b!.payload.byteLength).toBe(MLA_BLOCK_BYTES);
    }
    // the admin API's block detail says so too
    const res = await fetch(`${server.url}/admin/blocks/${blocks[0]!.key}`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
    expect(res.status).toBe(200);
    const detail = (await res.json()) as { storage: { header: { layout: { kind?: string }; payloadBytes: number } } };
    expect(detail.storage.header).toMatchObject({ layout: { kind: 'mla', headDim: 80 }, payloadBytes: MLA_BLOCK_BYTES });
  });
});
