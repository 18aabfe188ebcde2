/**
 * Retained sequences on unit architectures through the API (the embedded
 * engine thread, src/scheduler/engine-thread.ts): the worker keeps a
 * finished sequence in the engine and a next turn whose prompt holds it
 * whole continues it (units.ts takeWholeDonor) instead of reading the unit
 * the previous turn wrote. Cached tokens are the same either way (the
 * previous reply's end); the tier's unit loads tell them apart.
 */
import { basename } from 'node:path';
import OpenAI from 'openai';
import { describe, expect, it } from 'vitest';

import { ensureGemma3Model } from '../../../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { TEST_DATA_DIR } from '../../inference-core/engine-fixtures.ts';
import { ADMIN_TOKEN, KEYS, startTestServer } from './server-fixture.ts';

interface TierStats {
  cache: { units: { loaded: number } };
  scheduler: { retained: number };
}

describe('retained sequences with prefix units through the API', () => {
  it.each([
    ['lfm2', () => ensureLfm2Model({ dataDir: TEST_DATA_DIR })],
    ['gemma3', () => ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR })],
  ])('%s: each turn continues the previous turn\'s retained sequence (cached = its end, no unit read); with retention off the same turns read the units', async (_arch, ensureModel) => {
    const modelPath = ensureModel();
    const model = basename(modelPath, '.gguf');
    const run = async (retainSequences: number) => {
      const server = await startTestServer({ model: modelPath, retainSequences });
      try {
        const alice = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
        const chat: OpenAI.Chat.Completions.ChatCompletionMessageParam[] = [{ role: 'user', content: 'Turn 1: hello there' }];
        const replies: string[] = [];
        let previousEnd = 0;
        for (let i = 1; i <= 3; i++) {
          const r = await alice.chat.completions.create({ model, messages: chat, max_tokens: 8, temperature: 0 });
          expect(r.usage!.prompt_tokens_details!.cached_tokens).toBe(previousEnd);
          previousEnd = r.usage!.prompt_tokens + r.usage!.completion_tokens;
          replies.push(r.choices[0].message.content ?? '');
          chat.push({ role: 'assistant', content: r.choices[0].message.content ?? '' });
          chat.push({ role: 'user', content: `Turn ${i + 1}: and then?` });
        }
        const response = await fetch(`${server.url}/admin/stats`, { headers: { authorization: `Bearer ${ADMIN_TOKEN}` } });
        const { tier } = (await response.json()) as { tier: TierStats };
        return { replies, loaded: tier.cache.units.loaded, retained: tier.scheduler.retained };
      } finally {
        await server.close();
      }
    };
    const kept = await run(16);
    // turns 2 and 3 continued the engine's own sequence (the units are still written: their writes are queued, not counted here)
    expect(kept.loaded).toBe(0);
    expect(kept.retained).toBe(1);
    const off = await run(0);
    expect(off.loaded).toBe(2);
    // bit for bit: the same greedy replies whichever way the state came back
    expect(kept.replies).toEqual(off.replies);
  }, 300_000);
});
