/**
 * The shape of the body: too large, too deep, too wide, not an object, roles
 * and content parts no route takes, too many messages. Each is a 4xx whose
 * JSON error names the limit or field, on every generate route (the
 * Responses route included), and the server still answers afterwards.
 */
import { describe, expect, it } from 'vitest';

import { ADMIN_TOKEN, startTestServer } from './server-fixture.ts';
import { expectRefused, expectStillServes, GENERATE_ROUTES, MODEL, send, validBody, type Route } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer({ maxMessages: 1000 }), (s) => s.close());

/** The route's body with `text` as its whole prompt. */
function promptBody(route: Route, text: string): Record<string, unknown> {
  if (route === '/v1/completions') return validBody(route, { prompt: text });
  if (route === '/v1/responses') return validBody(route, { input: text });
  return validBody(route, { messages: [{ role: 'user', content: text }] });
}

const promptParam = (route: Route): string => (route === '/v1/completions' ? 'prompt' : route === '/v1/responses' ? 'input' : 'messages');

describe('size', () => {
  it('a body past KVTIER_MAX_BODY_BYTES → 413 naming the limit, on every generate route and on admin', async () => {
    const text = 'z'.repeat(server().config.maxBodyBytes);
    for (const route of GENERATE_ROUTES) {
      expectRefused(await send(server().url, 'POST', route, promptBody(route, text)), 413, { code: 'KVT_ERR_REQUEST_TOO_LARGE', param: 'body', mentions: new RegExp(`${server().config.maxBodyBytes} bytes \\(KVTIER_MAX_BODY_BYTES\\)`) }, route);
    }
    expectRefused(await send(server().url, 'PUT', '/admin/policy', { classes: {}, tenants: { x: text } }, { authorization: `Bearer ${ADMIN_TOKEN}` }), 413, { code: 'KVT_ERR_REQUEST_TOO_LARGE' }, 'admin');
    await expectStillServes(server().url);
  });

  it('a prompt past the context (2 MB of text, under the body limit) → 400 naming the context length and the prompt field', async () => {
    const text = 'lorem ipsum dolor sit amet '.repeat(80_000);
    for (const route of GENERATE_ROUTES) {
      const reply = await send(server().url, 'POST', route, promptBody(route, text));
      expectRefused(reply, 400, { code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: promptParam(route), mentions: /context length is \d+ tokens/ }, route);
    }
    await expectStillServes(server().url);
  });

  it('more messages or input items than KVTIER_MAX_MESSAGES → 400 naming the limit (Responses input included)', async () => {
    const messages = Array.from({ length: 1001 }, (_, i) => ({ role: i % 2 ? 'assistant' : 'user', content: 'x' }));
    for (const route of ['/v1/chat/completions', '/v1/messages'] as const) {
      expectRefused(await send(server().url, 'POST', route, validBody(route, { messages })), 400, { code: 'KVT_ERR_REQUEST_TOO_MANY_MESSAGES', param: 'messages', mentions: /KVTIER_MAX_MESSAGES/ }, route);
    }
    expectRefused(await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { input: messages })), 400, { code: 'KVT_ERR_REQUEST_TOO_MANY_MESSAGES', param: 'input', mentions: /KVTIER_MAX_MESSAGES/ });
  });
});

describe('structure', () => {
  it('JSON nested 100k deep anywhere → 400 KVT_ERR_REQUEST_TOO_DEEP naming the path, on every route', async () => {
    const deep = '['.repeat(100_000) + ']'.repeat(100_000);
    for (const route of GENERATE_ROUTES) {
      const body = JSON.stringify(validBody(route, { metadata: 0 })).replace('"metadata":0', `"metadata":${deep}`);
      expectRefused(await send(server().url, 'POST', route, body), 400, { code: 'KVT_ERR_REQUEST_TOO_DEEP', param: /^metadata(\[0\])+$/, mentions: /KVTIER_MAX_JSON_DEPTH/ }, route);
    }
    // A body that is nothing but nesting.
    expectRefused(await send(server().url, 'POST', '/v1/chat/completions', deep), 400, { code: 'KVT_ERR_REQUEST_TOO_DEEP' }, 'bare');
    await expectStillServes(server().url);
  });

  it('a wide body: 200k template variables or Responses metadata pairs → 400 naming the limit (the render took 20 s per request before); wide arrays are refused by the context, never a 5xx', async () => {
    const wide: Record<string, string> = {};
    for (let i = 0; i < 200_000; i++) wide[`k${i}`] = 'v';
    for (const route of ['/v1/chat/completions', '/v1/messages', '/v1/responses'] as const) {
      expectRefused(await send(server().url, 'POST', route, validBody(route, { chat_template_kwargs: wide })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'chat_template_kwargs', mentions: /more than 64 properties/ }, route);
    }
    expectRefused(await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { metadata: wide })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'metadata', mentions: /more than 16 properties/ });
    expectRefused(await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { metadata: { k: 'v'.repeat(513) } })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'metadata.k' });
    expect((await send(server().url, 'POST', '/v1/responses', validBody('/v1/responses', { metadata: { run: 'r1', user: 'u' } }))).status).toBe(200);
    expectRefused(await send(server().url, 'POST', '/v1/completions', validBody('/v1/completions', { prompt: Array.from({ length: 500_000 }, () => 1) })), 400, { code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: 'prompt' });
    const parts = Array.from({ length: 200_000 }, () => ({ type: 'text', text: 'a' }));
    expectRefused(await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { messages: [{ role: 'user', content: parts }] })), 400, { code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW', param: 'messages' });
    await expectStillServes(server().url);
  });

  it('a body that is not an object (array, string, number, null) → 400 naming the body', async () => {
    for (const route of GENERATE_ROUTES) {
      for (const body of ['[]', '"text"', '42', 'null']) {
        const reply = await send(server().url, 'POST', route, body);
        expect(reply.status, `${route} ${body}: ${reply.text.slice(0, 200)}`).toBe(400);
        expect((reply.json!.error as { message: string }).message, route).toMatch(/^body /);
      }
    }
  });

  it('unknown roles → 400 naming the role field, on chat, messages and responses', async () => {
    const cases: Array<[Route, Record<string, unknown>, string]> = [
      ['/v1/chat/completions', { messages: [{ role: 'root', content: 'x' }] }, 'messages[0].role'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: 'x' }, { role: 'function', content: 'x' }] }, 'messages[1].role'],
      ['/v1/messages', { messages: [{ role: 'system', content: 'x' }] }, 'messages[0].role'],
      ['/v1/messages', { messages: [{ role: 'tool', content: 'x' }] }, 'messages[0].role'],
      ['/v1/responses', { input: [{ type: 'message', role: 'tool', content: 'x' }] }, 'input[0].role'],
      ['/v1/responses', { input: [{ role: 'bogus', content: 'x' }] }, 'input[0].role'],
    ];
    for (const [route, extra, param] of cases) {
      expectRefused(await send(server().url, 'POST', route, validBody(route, extra)), 400, { code: 'KVT_ERR_REQUEST_INVALID', param }, `${route} ${param}`);
    }
    await expectStillServes(server().url);
  });

  it('content parts and blocks no route takes (images, audio, unknown types) → 400 naming the part', async () => {
    const cases: Array<[Route, Record<string, unknown>, string]> = [
      ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'image_url', image_url: { url: 'data:,' } }] }] }, 'messages[0].content[0].type'],
      ['/v1/chat/completions', { messages: [{ role: 'user', content: [{ type: 'text' }] }] }, 'messages[0].content[0].type'],
      ['/v1/messages', { messages: [{ role: 'user', content: [{ type: 'image', source: {} }] }] }, 'messages[0].content[0].type'],
      ['/v1/messages', { messages: [{ role: 'assistant', content: [{ type: 'server_tool_use' }] }] }, 'messages[0].content[0].type'],
      ['/v1/responses', { input: [{ role: 'user', content: [{ type: 'input_image', image_url: 'x' }] }] }, 'input[0].content[0].type'],
      ['/v1/responses', { input: [{ type: 'computer_call', call_id: 'c' }] }, 'input[0].type'],
    ];
    for (const [route, extra, param] of cases) {
      expectRefused(await send(server().url, 'POST', route, validBody(route, extra)), 400, { code: 'KVT_ERR_REQUEST_INVALID', param }, `${route} ${param}`);
    }
    expect(MODEL).toBe('synthetic:tiny');
    await expectStillServes(server().url);
  });
});
