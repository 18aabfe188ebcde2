/**
 * Fuzzes the generate routes' request schemas (src/serve/schemas.ts and the
 * recipe behind them) with random JSON bodies, in-process through Fastify's
 * inject on a real embedded server (synthetic:tiny): a body is answered 2xx or
 * 4xx, never 5xx, and every 4xx is the route's error envelope.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { KEYS, startTestServer, type TestServer } from '../src/serve/server-fixture.ts';
import { fuzz, int, pick, randomString, type Rand } from './fuzz-runner.ts';

let server: TestServer;
beforeAll(async () => {
  server = await startTestServer();
});
afterAll(async () => server?.close());

const ROUTES = ['/v1/chat/completions', '/v1/completions', '/v1/messages', '/v1/responses'] as const;
const KEYS_BY_ROUTE: Record<(typeof ROUTES)[number], string[]> = {
  '/v1/chat/completions': ['model', 'messages', 'max_tokens', 'max_completion_tokens', 'temperature', 'top_p', 'n', 'stream', 'stop', 'seed', 'logit_bias', 'tools', 'tool_choice', 'response_format', 'stream_options', 'presence_penalty', 'frequency_penalty', 'logprobs', 'top_logprobs', 'user'],
  '/v1/completions': ['model', 'prompt', 'max_tokens', 'temperature', 'top_p', 'n', 'stream', 'stop', 'seed', 'echo', 'logit_bias', 'suffix'],
  '/v1/messages': ['model', 'messages', 'system', 'max_tokens', 'temperature', 'top_p', 'top_k', 'stream', 'stop_sequences', 'tools', 'tool_choice', 'metadata', 'thinking'],
  '/v1/responses': ['model', 'input', 'instructions', 'max_output_tokens', 'temperature', 'top_p', 'stream', 'store', 'previous_response_id', 'tools', 'tool_choice', 'text', 'truncation', 'background', 'include', 'reasoning'],
};

function randomValue(rand: Rand, depth: number): unknown {
  const r = rand();
  if (depth > 3 || r < 0.15) return pick(rand, [null, true, false, 0, -1, 1, 2, 0.5, 1e308, -1e308, 2 ** 53, 4294967296, 128, 16]);
  if (r < 0.45) return pick(rand, ['', 'user', 'assistant', 'system', 'tool', 'developer', 'text', 'function', 'auto', 'none', 'json_object', 'synthetic:tiny', '\u0000', '\ud800']) + (rand() < 0.3 ? randomString(rand, 12, { loneSurrogates: true }) : '');
  if (r < 0.7) return Array.from({ length: int(rand, 4) }, () => randomValue(rand, depth + 1));
  const out: Record<string, unknown> = {};
  for (let i = int(rand, 4); i > 0; i--) out[pick(rand, ['role', 'content', 'type', 'text', 'name', 'tool_calls', 'tool_call_id', 'id', 'function', 'arguments', 'parameters', 'input', 'tool_use_id', 'source', 'json_schema', 'schema', 'strict', 'x'])] = randomValue(rand, depth + 1);
  return out;
}

/** A valid-looking body of `route` with a few fields replaced by random values. */
function body(rand: Rand, route: (typeof ROUTES)[number]): Record<string, unknown> {
  const base: Record<string, unknown> =
    route === '/v1/completions'
      ? { model: 'synthetic:tiny', prompt: 'hello', max_tokens: 4 }
      : route === '/v1/responses'
        ? { model: 'synthetic:tiny', input: 'hello', max_output_tokens: 16 }
        : { model: 'synthetic:tiny', max_tokens: 4, messages: [{ role: 'user', content: 'hello' }] };
  for (let i = 1 + int(rand, 3); i > 0; i--) base[pick(rand, KEYS_BY_ROUTE[route])] = randomValue(rand, 0);
  // Keep generation short whatever the fuzz put there: the point is validation, not decoding.
  for (const k of ['max_tokens', 'max_output_tokens', 'max_completion_tokens']) if (typeof base[k] === 'number' && (base[k] as number) > 16 && rand() < 0.9) base[k] = 16;
  return base;
}

describe('fuzz: request schemas of the generate routes', () => {
  it('random JSON bodies never get a 5xx', async () => {
    const app = server.built.app;
    await fuzz({ name: 'request schemas', budgetMs: 4000, minCases: 40 }, async (rand) => {
      const route = pick(rand, ROUTES);
      const payload = body(rand, route);
      const response = await app.inject({ method: 'POST', url: route, headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' }, payload: JSON.stringify(payload) });
      expect(response.statusCode, `${route} ${JSON.stringify(payload).slice(0, 400)} -> ${response.body.slice(0, 400)}`).toBeLessThan(500);
      if (response.statusCode >= 400) expect(response.body).toMatch(/"error"/);
    });
  });
});
