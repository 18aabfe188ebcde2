/**
 * The new architectures of #26 served like `npm start` (embedded engine
 * thread, fs storage) through the OpenAI SDK, before units are wired into
 * the tier:
 *   - gemma3-tiny: the block tier is on (whole pages hold every layer's K/V,
 *     an exact state): cached tokens grow every turn, and each turn's greedy
 *     reply equals the same conversation sent cold by another tenant;
 *   - lfm2-tiny (convolution state outside the pages): no block tier and no
 *     retained-prefix reuse — cached tokens 0 every turn, no block files
 *     written — and the replies equal the cold ones too.
 */
import { existsSync, readdirSync } from 'node:fs';
import { basename, join } from 'node:path';
import OpenAI from 'openai';
import { afterAll, describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
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

  it('lfm2: no block tier (0 cached, no block files), replies equal the cold ones', async () => {
    const model = ensureLfm2Model({ dataDir: TEST_DATA_DIR });
    const { cached, replies, cold, server } = await conversation(model);
    expect(cached).toEqual([0, 0, 0, 0]);
    expect(replies).toEqual(cold);
    expect(replies.every((r) => r.length > 0)).toBe(true);
    expect(blockFiles(join(server.dataDir, 'blocks')).filter((f) => !f.endsWith('.tmp'))).toEqual([]);
  }, 180_000);
});
