/**
 * The server with KVTIER_SPECULATIVE=ngram: a chat reply is the same as with
 * speculation off (greedy), and /metrics exports the per-request acceptance.
 * Config refuses `draft` without a draft model.
 */
import { describe, expect, it } from 'vitest';

import { loadConfig } from '../../../src/config.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const body = {
  model: 'synthetic:tiny',
  // A repetitive prompt: the tiny random model loops, so n-gram drafts are verified and many accepted.
  messages: [{ role: 'user', content: 'copy this: alpha beta gamma delta alpha beta gamma delta alpha beta gamma delta' }],
  max_tokens: 48,
  temperature: 0,
};

async function chat(server: TestServer): Promise<string> {
  const res = await fetch(`${server.url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' }, body: JSON.stringify(body) });
  expect(res.status).toBe(200);
  const json = (await res.json()) as { choices: { message: { content: string } }[] };
  return json.choices[0].message.content;
}

describe('speculative decoding in the server', () => {
  const spec = suiteFixture(() => startTestServer({ speculative: 'ngram' }), (s) => s.close(), 60_000);
  const plain = suiteFixture(() => startTestServer({ speculative: 'off' }), (s) => s.close(), 60_000);

  it('same greedy reply as without speculation; acceptance in /metrics', async () => {
    expect(await chat(spec())).toBe(await chat(plain()));
    const metrics = await (await fetch(`${spec().url}/metrics`)).text();
    expect(metrics).toMatch(/kvtier_speculative_acceptance_ratio_count 1\b/);
    const verified = /kvtier_speculative_draft_tokens_total\{result="accepted"\} (\d+)/.exec(metrics);
    expect(verified).not.toBeNull();
    const plainMetrics = await (await fetch(`${plain().url}/metrics`)).text();
    expect(plainMetrics).toMatch(/kvtier_speculative_acceptance_ratio_count 0\b/);
  }, 60_000);

  it('draft mode (KVTIER_DRAFT_MODEL = a q8_0 copy of the f16 model): same greedy reply', async () => {
    const draft = await startTestServer({ speculative: 'draft', draftModel: 'synthetic:tiny:q8_0' });
    try {
      expect(await chat(draft)).toBe(await chat(plain()));
      const metrics = await (await fetch(`${draft.url}/metrics`)).text();
      expect(metrics).toMatch(/kvtier_speculative_acceptance_ratio_count 1\b/);
    } finally {
      await draft.close();
    }
  }, 60_000);

  it('KVTIER_SPECULATIVE=draft without KVTIER_DRAFT_MODEL is a config error', () => {
    expect(() => loadConfig({ KVTIER_SPECULATIVE: 'draft' })).toThrow(/KVTIER_DRAFT_MODEL/);
    expect(() => loadConfig({ KVTIER_SPECULATIVE: 'maybe' })).toThrow(/KVTIER_SPECULATIVE/);
  });
});
