/**
 * Block codecs end to end (embedded server, fs storage): with the policy's
 * codec set through PUT /admin/policy, a conversation continued on restarted
 * servers (nothing in RAM: cached tokens come from storage, decompressed on
 * load) reports the same cached tokens as the uncompressed run; replies equal
 * it for none, and for int8/fp8/int4 too on synthetic:tiny, whose measured
 * greedy agreement is 32/32 for every codec (codec-quality.test.ts); every
 * stored file's header names the codec, and GET /admin/blocks/:key (what
 * `kvtier inspect` prints) shows it. On deepseek-tiny (MLA latent) the route
 * answers 400 KVT_ERR_POLICY_CODEC_QUALITY for int4, naming the codec and its
 * measured deviation, unless "force": true.
 */
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';

import type { Config } from '../../../src/config.ts';
import { ADMIN_TOKEN, KEYS, startTestServer } from './server-fixture.ts';

const BLOCK = 64;
const SYSTEM = 'You are kvtier, storing every block compressed. ' + 'Answer in one short line and cite the cache. '.repeat(10);
const CODECS = ['none', 'int8', 'fp8', 'int4'] as const;

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;
interface Turn {
  reply: string;
  promptTokens: number;
  cachedTokens: number;
}

const admin = { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' };

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

async function putPolicy(url: string, body: unknown): Promise<{ status: number; body: Record<string, unknown> }> {
  const response = await fetch(`${url}/admin/policy`, { method: 'PUT', headers: admin, body: JSON.stringify(body) });
  return { status: response.status, body: (await response.json()) as Record<string, unknown> };
}

/** Three turns, each on a fresh server over `dataDir`; the first sets the codec (the embedded policy persists in dataDir). */
async function conversation(dataDir: string, codec: (typeof CODECS)[number] | null, overrides: Partial<Config> = {}): Promise<Turn[]> {
  const messages: Message[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: how small is a block?' }];
  const turns: Turn[] = [];
  for (let t = 1; t <= 3; t++) {
    const server = await startTestServer({ dataDir, retainSequences: 0, hotCacheBytes: 0, ...overrides });
    try {
      if (t === 1 && codec !== null) expect((await putPolicy(server.url, { codec })).status).toBe(200);
      const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
      const r = await client.chat.completions.create({ model: 'synthetic:tiny', messages, max_tokens: 12, temperature: 0 });
      const stats = (await (await fetch(`${server.url}/admin/stats`, { headers: admin })).json()) as { tier: { cache: { errors: Record<string, number> } } };
      expect(stats.tier.cache.errors).toEqual({});
      const turn = { reply: r.choices[0].message.content ?? '', promptTokens: r.usage!.prompt_tokens, cachedTokens: r.usage!.prompt_tokens_details!.cached_tokens! };
      turns.push(turn);
      messages.push({ role: 'assistant', content: turn.reply }, { role: 'user', content: `Turn ${t + 1}: and after a restart?` });
      if (t === 3 && codec !== null) {
        // Inspect shows the codec of a stored block.
        const listing = (await (await fetch(`${server.url}/admin/blocks?limit=1`, { headers: admin })).json()) as { blocks: { key: string }[] };
        const detail = (await (await fetch(`${server.url}/admin/blocks/${listing.blocks[0].key}`, { headers: admin })).json()) as { storage: { header: { codec: string; storedPayloadBytes: number; payloadBytes: number } } };
        expect(detail.storage.header.codec).toBe(codec);
        if (codec !== 'none') expect(detail.storage.header.storedPayloadBytes).toBeLessThan(0.53 * detail.storage.header.payloadBytes);
      }
    } finally {
      await server.close();
    }
  }
  return turns;
}

describe('block codecs through the API', () => {
  it('synthetic:tiny: same cached tokens as the uncompressed run under every codec; replies equal; headers and inspect name the codec', async () => {
    const plain = await conversation(mkdtempSync(join(tmpdir(), 'kvtier-serve-codec-plain-')), null);
    for (let t = 1; t < plain.length; t++) expect(plain[t].cachedTokens).toBeGreaterThanOrEqual(Math.floor(plain[t - 1].promptTokens / BLOCK) * BLOCK);
    expect(plain[1].cachedTokens).toBeGreaterThan(0);
    for (const codec of CODECS) {
      const dir = mkdtempSync(join(tmpdir(), `kvtier-serve-codec-${codec}-`));
      const turns = await conversation(dir, codec);
      expect(turns.map((t) => t.cachedTokens), codec).toEqual(plain.map((t) => t.cachedTokens));
      expect(turns.map((t) => t.reply), codec).toEqual(plain.map((t) => t.reply));
      const stored = files(join(dir, 'blocks')).filter((f) => !f.includes('.tmp'));
      expect(stored.length).toBeGreaterThan(0);
      for (const file of stored) expect(readFileSync(file)[74], `${codec} ${file}`).toBe(CODECS.indexOf(codec));
    }
  }, 600_000);

  it('deepseek-tiny (MLA): int4 is refused with 400 naming the codec and the measured figure; forced it is accepted; int8 is within bound', async () => {
    const server = await startTestServer({ model: 'synthetic:deepseek-tiny' });
    try {
      const refused = await putPolicy(server.url, { codec: 'int4' });
      expect(refused.status).toBe(400);
      const error = refused.body.error as { code: string; message: string };
      expect(error.code).toBe('KVT_ERR_POLICY_CODEC_QUALITY');
      expect(error.message).toMatch(/codec int4 moves the served model's logits by up to [0-9.e+-]+ \([0-9.e+-]+ of their standard deviation; bound 0\.25\)/);
      expect(((await putPolicy(server.url, {})).body as { codec?: string }).codec).toBeUndefined();
      const forced = await putPolicy(server.url, { codec: 'int4', force: true });
      expect(forced.status).toBe(200);
      expect(forced.body.codec).toBe('int4');
      expect(forced.body.force).toBeUndefined();
      const int8 = await putPolicy(server.url, { codec: 'int8' });
      expect(int8.status).toBe(200);
      expect(int8.body.codec).toBe('int8');
      const bad = await putPolicy(server.url, { codec: 'zstd' });
      expect(bad.status).toBe(400);
    } finally {
      await server.close();
    }
  }, 300_000);
});
