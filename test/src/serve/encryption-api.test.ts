/**
 * Encryption at rest end to end (embedded server, fs storage, synthetic:tiny):
 * with KVTIER_ENCRYPTION_SECRET's keyring on, a conversation continued on a
 * restarted server (nothing in RAM: its cached tokens come from storage)
 * reports the same cached tokens as the plaintext run and the same greedy
 * replies; every file on storage is a sealed envelope; `GET /admin/blocks/:key`
 * (what `kvtier inspect` prints) shows the algorithm and key id; a node with
 * encryption off reads those blocks as misses — replies unchanged, no error
 * to the client.
 */
import { mkdtempSync, readdirSync, readFileSync, statSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';

import type { Config } from '../../../src/config.ts';
import { keyringFromSecret, looksSealed } from '../../../src/kvtier/seal/index.ts';
import { ADMIN_TOKEN, KEYS, startTestServer } from './server-fixture.ts';

const MODEL = 'synthetic:tiny';
const BLOCK = 64;
const SECRET = 'encryption-api-test-secret-0123456789abcdef';
const SYSTEM = 'You are kvtier, sealing every block at rest. ' + 'Answer in one short line and cite the cache. '.repeat(10);

type Message = OpenAI.Chat.Completions.ChatCompletionMessageParam;
interface Turn {
  reply: string;
  promptTokens: number;
  cachedTokens: number;
}

function files(dir: string): string[] {
  return readdirSync(dir).flatMap((name) => {
    const p = join(dir, name);
    return statSync(p).isDirectory() ? files(p) : [p];
  });
}

/** One turn on a fresh server over `dataDir` (a restart per turn: RAM caches empty, hits come from storage). */
async function turnOnFreshServer(dataDir: string, messages: Message[], overrides: Partial<Config>): Promise<{ turn: Turn; errors: Record<string, number> }> {
  const server = await startTestServer({ dataDir, retainSequences: 0, hotCacheBytes: 0, ...overrides });
  try {
    const client = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
    const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
    const stats = (await (await fetch(`${server.url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } })).json()) as { tier: { cache: { errors: Record<string, number> } } };
    return {
      turn: { reply: r.choices[0].message.content ?? '', promptTokens: r.usage!.prompt_tokens, cachedTokens: r.usage!.prompt_tokens_details!.cached_tokens! },
      errors: stats.tier.cache.errors,
    };
  } finally {
    await server.close();
  }
}

async function conversation(dataDir: string, overrides: Partial<Config>): Promise<Turn[]> {
  const messages: Message[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what is stored at rest?' }];
  const turns: Turn[] = [];
  for (let t = 1; t <= 3; t++) {
    const { turn, errors } = await turnOnFreshServer(dataDir, messages, overrides);
    expect(errors).toEqual({});
    turns.push(turn);
    messages.push({ role: 'assistant', content: turn.reply }, { role: 'user', content: `Turn ${t + 1}: and after a restart?` });
  }
  return turns;
}

describe('encryption at rest through the API', () => {
  it('same cached tokens and replies as the plaintext run; sealed files; inspect shows the key id; encryption off → misses', async () => {
    const sealedDir = mkdtempSync(join(tmpdir(), 'kvtier-serve-sealed-'));
    const plainDir = mkdtempSync(join(tmpdir(), 'kvtier-serve-plain-'));
    const sealed = await conversation(sealedDir, { encryption: keyringFromSecret(SECRET) });
    const plain = await conversation(plainDir, {});

    expect(sealed.map((t) => t.reply)).toEqual(plain.map((t) => t.reply));
    expect(sealed.map((t) => t.cachedTokens)).toEqual(plain.map((t) => t.cachedTokens));
    // From turn 2 on, the whole previous turn's full blocks were read back from storage (and decrypted).
    for (let t = 1; t < sealed.length; t++) expect(sealed[t].cachedTokens).toBeGreaterThanOrEqual(Math.floor(sealed[t - 1].promptTokens / BLOCK) * BLOCK);
    expect(sealed[1].cachedTokens).toBeGreaterThan(0);

    const sealedFiles = files(join(sealedDir, 'blocks')).filter((f) => !f.includes('.tmp'));
    expect(sealedFiles.length).toBeGreaterThan(0);
    for (const file of sealedFiles) expect(looksSealed(readFileSync(file)), file).toBe(true);
    for (const file of files(join(plainDir, 'blocks')).filter((f) => !f.includes('.tmp'))) expect(looksSealed(readFileSync(file))).toBe(false);

    // Inspect (GET /admin/blocks/:key, as `kvtier inspect` uses it), and a node with encryption off over the sealed store.
    const off = await startTestServer({ dataDir: sealedDir, retainSequences: 0, hotCacheBytes: 0 });
    try {
      const admin = { authorization: `Bearer ${ADMIN_TOKEN}` };
      const listing = (await (await fetch(`${off.url}/admin/blocks?limit=1`, { headers: admin })).json()) as { blocks: { key: string }[] };
      const detail = (await (await fetch(`${off.url}/admin/blocks/${listing.blocks[0].key}`, { headers: admin })).json()) as { storage: { present: boolean; encryption?: unknown } };
      expect(detail.storage.present).toBe(true);
      expect(detail.storage.encryption).toEqual({ algorithm: 'aes-256-gcm', keyId: 1, envelopeVersion: 1 });

      const client = new OpenAI({ baseURL: `${off.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
      const messages: Message[] = [{ role: 'system', content: SYSTEM }, { role: 'user', content: 'Turn 1: what is stored at rest?' }];
      const r = await client.chat.completions.create({ model: MODEL, messages, max_tokens: 12, temperature: 0 });
      expect(r.choices[0].message.content).toBe(sealed[0].reply);
      expect(r.usage!.prompt_tokens_details!.cached_tokens).toBe(0);
      const stats = (await (await fetch(`${off.url}/admin/stats`, { headers: admin })).json()) as { tier: { cache: { errors: Record<string, number> } } };
      expect(stats.tier.cache.errors.KVT_ERR_SEAL_NO_KEYRING).toBeGreaterThan(0);
    } finally {
      await off.close();
    }
  }, 300_000);
});
