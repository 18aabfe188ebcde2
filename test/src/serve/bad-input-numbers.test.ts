/**
 * Absurd numbers on every generate route: a 400 naming the field (never a
 * 5xx, never a silent 200 for a value the reference APIs refuse), and a
 * server that still answers. Before: top_k ≥ 2^31 was a 500
 * KVT_ERR_NATIVE_ARG from the sampler on all four routes; seed past int64,
 * logit_bias of any form and penalties out of [-2, 2] were a 200; a
 * temperature whose inverse overflows was a 500.
 */
import { describe, expect, it } from 'vitest';

import { startTestServer } from './server-fixture.ts';
import { expectRefused, expectStillServes, GENERATE_ROUTES, send, validBody, type Route } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

const maxTokensField = (route: Route): string => (route === '/v1/responses' ? 'max_output_tokens' : 'max_tokens');

describe('absurd numbers', () => {
  it('max_tokens: 0, negative, fractional, 1e12, 2^60, 1e400 (Infinity) → 400 naming it', async () => {
    for (const route of GENERATE_ROUTES) {
      const field = maxTokensField(route);
      for (const value of [0, -1, 1.5, 1e12, 2 ** 60]) {
        const reply = await send(server().url, 'POST', route, validBody(route, { [field]: value }));
        expect(reply.status, `${route} ${value}: ${reply.text.slice(0, 200)}`).toBe(400);
        expect((reply.json!.error as { param: string }).param, `${route} ${value}`).toBe(field);
      }
      const infinite = JSON.stringify(validBody(route, { [field]: 7 })).replace(`"${field}":7`, `"${field}":1e400`);
      expectRefused(await send(server().url, 'POST', route, infinite), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: field }, `${route} 1e400`);
    }
    await expectStillServes(server().url);
  });

  it('top_k past the sampler\'s 32-bit range (1e12, 2^40) → 400 naming top_k (was 500 KVT_ERR_NATIVE_ARG)', async () => {
    for (const route of GENERATE_ROUTES) {
      for (const value of [1e12, 2 ** 40, 2 ** 31]) {
        expectRefused(await send(server().url, 'POST', route, validBody(route, { top_k: value })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'top_k', mentions: /2147483647/ }, `${route} ${value}`);
      }
      expectRefused(await send(server().url, 'POST', route, validBody(route, { top_k: -1 })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'top_k' }, `${route} -1`);
      // The largest accepted value keeps every token: a reply, not a fault.
      const widest = await send(server().url, 'POST', route, validBody(route, { top_k: 2 ** 31 - 1, temperature: 1 }));
      expect(widest.status, `${route} top_k 2^31-1: ${widest.text.slice(0, 200)}`).toBe(200);
    }
    await expectStillServes(server().url);
  });

  it('temperature and top_p out of range → 400; a temperature whose inverse overflows decodes greedily (was 500)', async () => {
    for (const route of GENERATE_ROUTES) {
      const maxTemperature = route === '/v1/messages' ? 1 : 2;
      for (const [field, value] of [['temperature', -0.5], ['temperature', maxTemperature + 0.01], ['temperature', 1e300], ['top_p', 0], ['top_p', 1.5], ['top_p', -1]] as const) {
        expectRefused(await send(server().url, 'POST', route, validBody(route, { [field]: value })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: field }, `${route} ${field}=${value}`);
      }
      const greedy = await send(server().url, 'POST', route, validBody(route, { temperature: 0, max_tokens: 3, ...(route === '/v1/responses' ? { max_output_tokens: 3, max_tokens: undefined } : {}) }));
      const tiny = await send(server().url, 'POST', route, validBody(route, { temperature: 5e-324, max_tokens: 3, ...(route === '/v1/responses' ? { max_output_tokens: 3, max_tokens: undefined } : {}) }));
      expect(tiny.status, `${route} 5e-324: ${tiny.text.slice(0, 200)}`).toBe(200);
      expect(textOf(route, tiny.json!), route).toBe(textOf(route, greedy.json!));
    }
    await expectStillServes(server().url);
  });

  it('seed outside int64 → 400 naming seed; any int64 seed is a reply', async () => {
    for (const route of ['/v1/chat/completions', '/v1/completions', '/v1/responses'] as const) {
      for (const value of [2 ** 64, -(2 ** 64), 1e300]) {
        expectRefused(await send(server().url, 'POST', route, validBody(route, { seed: value })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'seed' }, `${route} ${value}`);
      }
      expectRefused(await send(server().url, 'POST', route, validBody(route, { seed: 1.5 })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'seed' }, `${route} 1.5`);
      for (const value of [-1, 0, 2 ** 33, 2 ** 62]) expect((await send(server().url, 'POST', route, validBody(route, { seed: value }))).status, `${route} seed ${value}`).toBe(200);
    }
  });

  it('n other than 1 → 400 naming n', async () => {
    for (const route of ['/v1/chat/completions', '/v1/completions'] as const) {
      for (const value of [0, 2, 1e9]) expectRefused(await send(server().url, 'POST', route, validBody(route, { n: value })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'n' }, `${route} n=${value}`);
    }
  });

  it('logit_bias: non-integer keys, ids past the vocabulary, values outside [-100, 100] → 400 naming the key', async () => {
    const vocab = server().built.context.vocabSize;
    for (const route of ['/v1/chat/completions', '/v1/completions'] as const) {
      const cases: Array<[Record<string, unknown>, string | RegExp, RegExp]> = [
        [{ abc: 5 }, 'logit_bias', /key "abc"/],
        [{ '-1': 5 }, 'logit_bias', /key "-1"/],
        [{ '1.5': 5 }, 'logit_bias', /key "1.5"/],
        [{ '007': 5 }, 'logit_bias', /key "007"/],
        [{ [String(vocab)]: 5 }, `logit_bias.${vocab}`, new RegExp(`ids run from 0 to ${vocab - 1}`)],
        [{ '99999999999999999999': 5 }, 'logit_bias', /must match pattern/],
        [{ '1': 500 }, /^logit_bias/, /<= 100/],
        [{ '1': -101 }, /^logit_bias/, />= -100/],
        [{ '1': 'high' }, /^logit_bias/, /must be number/],
      ];
      for (const [bias, param, mentions] of cases) {
        expectRefused(await send(server().url, 'POST', route, validBody(route, { logit_bias: bias })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param, mentions }, `${route} ${JSON.stringify(bias)}`);
      }
      const fine = await send(server().url, 'POST', route, validBody(route, { logit_bias: { '0': -100, [String(vocab - 1)]: 100 } }));
      expect(fine.status, `${route}: ${fine.text.slice(0, 200)}`).toBe(200);
    }
  });

  it('presence_penalty / frequency_penalty outside [-2, 2] → 400 naming the field', async () => {
    for (const route of ['/v1/chat/completions', '/v1/completions'] as const) {
      for (const field of ['presence_penalty', 'frequency_penalty']) {
        for (const value of [-2.5, 3, 1e9]) expectRefused(await send(server().url, 'POST', route, validBody(route, { [field]: value })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: field }, `${route} ${field}=${value}`);
      }
    }
    await expectStillServes(server().url);
  });

  it('completions token ids: negative, past the vocabulary, 2^40 → 400 naming prompt', async () => {
    for (const prompt of [[-1], [server().built.context.vocabSize], [2 ** 40], [1.5]]) {
      expectRefused(await send(server().url, 'POST', '/v1/completions', validBody('/v1/completions', { prompt })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'prompt' }, JSON.stringify(prompt));
    }
    await expectStillServes(server().url);
  });

  it('Anthropic thinking.budget_tokens: negative → 400; absurd but valid → a reply', async () => {
    expectRefused(await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { thinking: { type: 'enabled', budget_tokens: -1 } })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'thinking.budget_tokens' });
    expect((await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { thinking: { type: 'enabled', budget_tokens: 1e12 } }))).status).toBe(200);
  });
});

function textOf(route: Route, json: Record<string, unknown>): string {
  if (route === '/v1/chat/completions') return (json.choices as Array<{ message: { content: string } }>)[0].message.content;
  if (route === '/v1/completions') return (json.choices as Array<{ text: string }>)[0].text;
  if (route === '/v1/messages') return (json.content as Array<{ text?: string }>).map((b) => b.text ?? '').join('');
  return JSON.stringify((json.output as unknown[]) ?? []).replace(/"id":"[^"]*"/g, '');
}
