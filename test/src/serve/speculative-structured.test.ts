/**
 * Structured output with speculative decoding on, through the real server
 * (KVTIER_SPECULATIVE=ngram and =draft with a q8_0 draft of the f16 model):
 * greedy replies equal the server without speculation, token for token (the
 * text and the completion token count); at temperature 1 every reply parses,
 * validates (ajv) and stops; concurrent constrained replies (their draft
 * steps batched in the worker) equal the sequential plain ones; /metrics
 * counts the constrained requests' acceptance.
 */
import Ajv from 'ajv';
import OpenAI from 'openai';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { STRUCTURED_SCHEMAS } from '../../helpers/structured-schemas.ts';
import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

const MODEL = 'synthetic:tiny';
// Every fourth schema: each kind of keyword still appears, in a test time the shared machine affords.
const SCHEMAS = STRUCTURED_SCHEMAS.filter((_, i) => i % 4 === 0);
const ajv = new Ajv({ strict: false });

let plain: TestServer;
let ngram: TestServer;
let draft: TestServer;

beforeAll(async () => {
  plain = await startTestServer({ speculative: 'off' });
  ngram = await startTestServer({ speculative: 'ngram' });
  draft = await startTestServer({ speculative: 'draft', draftModel: 'synthetic:tiny:q8_0' });
}, 120_000);

afterAll(async () => {
  await Promise.all([plain?.close(), ngram?.close(), draft?.close()]);
});

async function chatJson(server: TestServer, schema: Record<string, unknown>, temperature: number, seed: number, stream = false): Promise<{ text: string; finish: string | null; tokens: number }> {
  const openai = new OpenAI({ baseURL: `${server.url}/v1`, apiKey: KEYS.alice, maxRetries: 0 });
  const request = {
    model: MODEL,
    // Repeated JSON in the prompt: n-gram lookups find continuations the grammar may allow.
    messages: [{ role: 'user' as const, content: `Reply with JSON like {"name": "abc", "items": [1, 2, 3], "ok": true} or {"name": "abc", "items": [1, 2, 3], "ok": true} (${seed}).` }],
    max_tokens: 80,
    temperature,
    seed,
    response_format: { type: 'json_schema' as const, json_schema: { name: 'reply', schema, strict: true } },
  };
  if (stream) {
    let text = '';
    let finish: string | null = null;
    for await (const chunk of await openai.chat.completions.create({ ...request, stream: true })) {
      text += chunk.choices[0]?.delta?.content ?? '';
      finish = chunk.choices[0]?.finish_reason ?? finish;
    }
    return { text, finish, tokens: -1 };
  }
  const r = await openai.chat.completions.create(request);
  return { text: r.choices[0].message.content ?? '', finish: r.choices[0].finish_reason, tokens: r.usage?.completion_tokens ?? -1 };
}

const acceptanceCount = async (server: TestServer) => Number(/kvtier_speculative_acceptance_ratio_count (\d+)/.exec(await (await fetch(`${server.url}/metrics`)).text())?.[1] ?? -1);

describe('structured output with speculative decoding', () => {
  it('greedy: n-gram and draft servers reply as the plain server, token for token; acceptance in /metrics', async () => {
    const before = await Promise.all([acceptanceCount(ngram), acceptanceCount(draft)]);
    for (const [i, { name, schema }] of SCHEMAS.entries()) {
      const want = await chatJson(plain, schema, 0, i);
      for (const server of [ngram, draft]) {
        const got = await chatJson(server, schema, 0, i);
        expect(got, `${name} on ${server.config.speculative}`).toEqual(want);
      }
    }
    const after = await Promise.all([acceptanceCount(ngram), acceptanceCount(draft)]);
    // Requests whose drafts were verified are counted (a reply can end before any draft).
    expect(after[0] - before[0]).toBeGreaterThan(SCHEMAS.length / 2);
    expect(after[1] - before[1]).toBeGreaterThan(SCHEMAS.length / 2);
  }, 600_000);

  it('temperature 1 (half streamed): every reply parses, validates and stops', async () => {
    const failures: string[] = [];
    for (const [i, { name, schema }] of SCHEMAS.entries()) {
      const validate = ajv.compile(schema);
      for (const server of [ngram, draft]) {
        const { text, finish } = await chatJson(server, schema, 1, 100 + i, i % 2 === 1);
        let ok = false;
        try {
          ok = validate(JSON.parse(text));
        } catch {
          ok = false;
        }
        if (!ok || finish !== 'stop') failures.push(`${name} ${server.config.speculative}: finish=${finish} ${text}`);
      }
    }
    expect(failures).toEqual([]);
  }, 600_000);

  it('concurrent constrained replies on the draft server (draft steps batched) equal sequential plain ones', async () => {
    const picked = SCHEMAS.slice(0, 6);
    const want: string[] = [];
    for (const [i, { schema }] of picked.entries()) want.push((await chatJson(plain, schema, 0, 50 + i)).text);
    const got = await Promise.all(picked.map(({ schema }, i) => chatJson(draft, schema, 0, 50 + i)));
    expect(got.map((g) => g.text)).toEqual(want);
  }, 300_000);
});
