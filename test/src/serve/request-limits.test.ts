/**
 * Limits before heavy work, on every generate route: multi-megabyte prompts
 * and bodies get a 4xx naming the limit (never a 500), message counts far
 * past the limit are refused at once, and a large transcript in flight does
 * not stall the event loop (/healthz keeps answering).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { KEYS, startTestServer, type TestServer } from './server-fixture.ts';

let server: TestServer;
let limited: TestServer;

beforeAll(async () => {
  server = await startTestServer();
  limited = await startTestServer({ maxMessages: 1000 });
});
afterAll(async () => {
  await server?.close();
  await limited?.close();
});

const MODEL = 'synthetic:tiny';
const headers = { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' };

async function post(url: string, path: string, body: unknown, extraHeaders: Record<string, string> = {}): Promise<{ status: number; json: Record<string, unknown> }> {
  const response = await fetch(`${url}${path}`, { method: 'POST', headers: { ...headers, ...extraHeaders }, body: typeof body === 'string' ? body : JSON.stringify(body) });
  return { status: response.status, json: (await response.json()) as Record<string, unknown> };
}

/** OpenAI and Anthropic error bodies, both: code, param, message. */
function errorOf(json: Record<string, unknown>): { code: string; param: string | null; message: string } {
  return json.error as { code: string; param: string | null; message: string };
}

const FIVE_MB = 'lorem ipsum dolor sit amet '.repeat(Math.ceil((5 * 1024 * 1024) / 27));

function bodies(text: string): Array<[string, unknown]> {
  return [
    ['/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: text }], max_tokens: 4 }],
    ['/v1/completions', { model: MODEL, prompt: text, max_tokens: 4 }],
    ['/v1/messages', { model: MODEL, max_tokens: 4, messages: [{ role: 'user', content: text }] }],
  ];
}

async function healthy(url: string): Promise<void> {
  expect((await fetch(`${url}/healthz`)).status).toBe(200);
  const reply = await post(url, '/v1/chat/completions', { model: MODEL, messages: [{ role: 'user', content: 'still there?' }], max_tokens: 2 });
  expect(reply.status).toBe(200);
}

describe('request limits', () => {
  it('a 5 MB prompt: 400 naming the context length on chat, completions and messages; the server stays healthy', async () => {
    for (const [path, body] of bodies(FIVE_MB)) {
      const { status, json } = await post(server.url, path, body);
      expect(status, path).toBe(400);
      const error = errorOf(json);
      expect(error.code, path).toBe('KVT_ERR_REQUEST_CONTEXT_OVERFLOW');
      expect(error.message, path).toMatch(/context length is \d+ tokens/);
      expect(error.param, path).toBe(path === '/v1/completions' ? 'prompt' : 'messages');
    }
    await healthy(server.url);
  });

  it('a 20 MB body: 413 naming KVTIER_MAX_BODY_BYTES on chat, completions and messages; the server stays healthy', async () => {
    for (const [path, body] of bodies(FIVE_MB.repeat(4))) {
      const { status, json } = await post(server.url, path, body);
      expect(status, path).toBe(413);
      const error = errorOf(json);
      expect(error.code, path).toBe('KVT_ERR_REQUEST_TOO_LARGE');
      expect(error.message, path).toContain('KVTIER_MAX_BODY_BYTES');
      expect(error.message, path).toContain(String(server.config.maxBodyBytes));
    }
    await healthy(server.url);
  });

  it('100,000 messages: 400 naming KVTIER_MAX_MESSAGES on chat and messages', async () => {
    const messages = Array.from({ length: 100_000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'x' }));
    for (const path of ['/v1/chat/completions', '/v1/messages']) {
      const { status, json } = await post(server.url, path, { model: MODEL, max_tokens: 4, messages });
      expect(status, path).toBe(400);
      expect(errorOf(json).code).toBe('KVT_ERR_REQUEST_TOO_MANY_MESSAGES');
      expect(errorOf(json).param).toBe('messages');
      expect(errorOf(json).message).toContain(`at most ${server.config.maxMessages} (KVTIER_MAX_MESSAGES)`);
    }
    await healthy(server.url);
  });

  it('a request without a key is 401 whatever its body', async () => {
    for (const [path, body] of [...bodies('hi'), ['/v1/chat/completions', { model: 7, messages: 'no' }] as [string, unknown], ['/v1/messages', '{"truncated": ']] as Array<[string, unknown]>) {
      const response = await fetch(`${server.url}${path}`, { method: 'POST', headers: { 'content-type': 'application/json' }, body: typeof body === 'string' ? body : JSON.stringify(body) });
      // Authentication is the app's onRequest hook, before the body is parsed: a body that is not JSON is a 401 too.
      expect(response.status, `${path} ${JSON.stringify(body)}`).toBe(401);
    }
  });

  it('JSON nested past KVTIER_MAX_JSON_DEPTH (tool schemas, tool inputs, tool-call arguments): 400 naming the field', async () => {
    // Built as text: JSON.stringify itself recurses, and would overflow first.
    const deep = '{"type":"object","properties":{"a":'.repeat(5000) + '{"type":"string"}' + '}}'.repeat(5000);
    const chat = await post(server.url, '/v1/chat/completions', `{"model":"${MODEL}","max_tokens":2,"messages":[{"role":"user","content":"x"}],"tools":[{"type":"function","function":{"name":"f","parameters":${deep}}}]}`);
    expect(chat.status).toBe(400);
    expect(errorOf(chat.json).code).toBe('KVT_ERR_REQUEST_TOO_DEEP');
    expect(errorOf(chat.json).param).toMatch(/^tools\[0\]\.function\.parameters\.properties\.a\./);
    const anthropic = await post(server.url, '/v1/messages', `{"model":"${MODEL}","max_tokens":2,"messages":[{"role":"user","content":"x"}],"tools":[{"name":"f","input_schema":${deep}}]}`);
    expect(anthropic.status).toBe(400);
    expect(errorOf(anthropic.json).code).toBe('KVT_ERR_REQUEST_TOO_DEEP');
    const args = '{"a":'.repeat(5000) + '1' + '}'.repeat(5000);
    const history = await post(server.url, '/v1/chat/completions', {
      model: MODEL,
      max_tokens: 2,
      messages: [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: null, tool_calls: [{ id: 'c1', type: 'function', function: { name: 'f', arguments: args } }] },
        { role: 'tool', tool_call_id: 'c1', content: 'ok' },
      ],
    });
    expect(history.status).toBe(400);
    expect(errorOf(history.json).code).toBe('KVT_ERR_REQUEST_TOO_DEEP');
    expect(errorOf(history.json).param).toMatch(/^messages\[1\]\.tool_calls\[0\]\.function\.arguments\.a\./);
    await healthy(server.url);
  });

  for (const [name, target] of [
    ['under the limit', () => server],
    ['over the limit', () => limited],
  ] as const) {
    it(`4,000 messages (${name}): /healthz keeps answering while they are processed`, async () => {
      const { url } = target();
      const messages = Array.from({ length: 4000 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: `turn ${i}: ${'some words of the conversation '.repeat(3)}` }));
      // Ordering, not wall time: a probe answered while a request is in flight proves the event
      // loop was free during it. A loop blocked by the request would answer every probe after.
      let inFlight = 0;
      let answeredInFlight = 0;
      let done = false;
      const probe = (async () => {
        while (!done) {
          const response = await fetch(`${url}/healthz`);
          await response.arrayBuffer();
          expect(response.status).toBe(200);
          if (inFlight > 0) answeredInFlight++;
          await new Promise((resolve) => setTimeout(resolve, 1));
        }
      })();
      const prompts = target().built.context.prompts.built;
      const before = { ...prompts };
      const results = [];
      for (const path of ['/v1/chat/completions', '/v1/messages', '/v1/chat/completions']) {
        inFlight++;
        results.push(await post(url, path, { model: MODEL, max_tokens: 2, messages }));
        inFlight--;
      }
      done = true;
      await probe;
      for (const { status, json } of results) {
        expect(status).toBe(400);
        expect(errorOf(json).code).toBe(name === 'over the limit' ? 'KVT_ERR_REQUEST_TOO_MANY_MESSAGES' : 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW');
      }
      // Under the limit each transcript is rendered and tokenized off the event loop, on the
      // prompt thread; over it, the preflight refuses it before any of that work.
      expect(prompts.inline).toBe(before.inline);
      expect(prompts.thread - before.thread).toBe(name === 'under the limit' ? 3 : 0);
      if (name === 'under the limit') expect(answeredInFlight).toBeGreaterThan(0);
    });
  }
});
