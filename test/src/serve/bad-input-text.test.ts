/**
 * Text that is not text, and stop strings: bytes that are not UTF-8 and lone
 * surrogate escapes → 400 naming the byte / field (before: a 200, the model
 * reading U+FFFD the client never sent); NUL and control characters are text
 * and get a well-formed reply; too many or too long stop strings → 400 naming
 * the limit (before: 5 OpenAI stops and a 200 kB stop string were a 200).
 */
import { describe, expect, it } from 'vitest';

import { MAX_STOP_CHARS } from '../../../src/serve/schemas.ts';
import { startTestServer } from './server-fixture.ts';
import { expectRefused, expectStillServes, GENERATE_ROUTES, send, validBody } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

describe('bytes and characters', () => {
  it('a body that is not UTF-8 (a stray 0xFF, a truncated sequence, an overlong form, a CESU surrogate) → 400 KVT_ERR_REQUEST_BAD_JSON naming the byte', async () => {
    const json = JSON.stringify(validBody('/v1/chat/completions', { messages: [{ role: 'user', content: '@@' }] }));
    const [before, after] = json.split('@@');
    const bad: Array<[string, number[]]> = [
      ['0xFF', [0xff]],
      ['truncated 3-byte sequence', [0xe2, 0x82]],
      ['overlong "/"', [0xc0, 0xaf]],
      ['CESU-8 surrogate', [0xed, 0xa0, 0x80]],
      ['past U+10FFFF', [0xf4, 0x90, 0x80, 0x80]],
    ];
    for (const [name, bytes] of bad) {
      const body = Buffer.concat([Buffer.from(before), Buffer.from('ok'), Buffer.from(bytes), Buffer.from(after)]);
      const error = expectRefused(await send(server().url, 'POST', '/v1/chat/completions', body), 400, { code: 'KVT_ERR_REQUEST_BAD_JSON', param: 'body', mentions: /not valid UTF-8/ }, name);
      expect(error.message, name).toContain(`byte ${Buffer.byteLength(before) + 2} of`);
    }
    // Multi-byte UTF-8, a BOM-free 4-byte emoji, and the same text sent escaped: fine.
    expect((await send(server().url, 'POST', '/v1/chat/completions', Buffer.from(`${before}é漢字😀${after}`))).status).toBe(200);
    await expectStillServes(server().url);
  });

  it('a lone surrogate escape in any string (content, stop, system, a key) → 400 naming the field, on every generate route', async () => {
    const cases: Array<[string, string, string]> = [
      ['/v1/chat/completions', '{"model":"synthetic:tiny","max_tokens":2,"messages":[{"role":"user","content":"a\\ud800b"}]}', 'messages[0].content'],
      ['/v1/chat/completions', '{"model":"synthetic:tiny","max_tokens":2,"stop":["\\udfff"],"messages":[{"role":"user","content":"a"}]}', 'stop[0]'],
      ['/v1/chat/completions', '{"model":"synthetic:tiny","max_tokens":2,"messages":[{"role":"user","content":"a"}],"chat_template_kwargs":{"x\\ud83d":1}}', 'chat_template_kwargs'],
      ['/v1/completions', '{"model":"synthetic:tiny","max_tokens":2,"prompt":"\\ude00 tail"}', 'prompt'],
      ['/v1/messages', '{"model":"synthetic:tiny","max_tokens":2,"system":"s\\ud800","messages":[{"role":"user","content":"a"}]}', 'system'],
      ['/v1/responses', '{"model":"synthetic:tiny","max_output_tokens":2,"input":[{"role":"user","content":"lo\\udc00ne"}]}', 'input[0].content'],
    ];
    for (const [route, body, param] of cases) {
      expectRefused(await send(server().url, 'POST', route, body), 400, { code: 'KVT_ERR_REQUEST_INVALID', param, mentions: /lone UTF-16 surrogate/ }, `${route} ${param}`);
    }
    // A proper pair, escaped: one emoji, a reply.
    expect((await send(server().url, 'POST', '/v1/chat/completions', '{"model":"synthetic:tiny","max_tokens":2,"messages":[{"role":"user","content":"a\\ud83d\\ude00b"}]}')).status).toBe(200);
    await expectStillServes(server().url);
  });

  it('NUL and control characters in content are text: a well-formed reply on every route', async () => {
    const text = 'before\u0000after\u0001\u001b[31m\u007f\u2028\u2029';
    const bodies = {
      '/v1/chat/completions': { messages: [{ role: 'system', content: text }, { role: 'user', content: text }] },
      '/v1/completions': { prompt: text },
      '/v1/messages': { system: text, messages: [{ role: 'user', content: text }] },
      '/v1/responses': { instructions: text, input: text },
    } as const;
    for (const route of GENERATE_ROUTES) {
      const reply = await send(server().url, 'POST', route, validBody(route, bodies[route]));
      expect(reply.status, `${route}: ${reply.text.slice(0, 200)}`).toBe(200);
      expect(reply.json, route).not.toBeNull();
    }
    // A NUL where a name is expected is not a name.
    expectRefused(await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions', { model: 'synthetic:tiny\u0000' })), 404, { code: 'KVT_ERR_REQUEST_UNKNOWN_MODEL', param: 'model' });
    await expectStillServes(server().url);
  });
});

describe('stop strings', () => {
  it('OpenAI: more than 4 stop strings → 400 naming stop (the reference takes 4)', async () => {
    for (const route of ['/v1/chat/completions', '/v1/completions'] as const) {
      expectRefused(await send(server().url, 'POST', route, validBody(route, { stop: ['a', 'b', 'c', 'd', 'e'] })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'stop', mentions: /more than 4 items/ }, route);
      expect((await send(server().url, 'POST', route, validBody(route, { stop: ['a', 'b', 'c', 'd'] }))).status, route).toBe(200);
      expectRefused(await send(server().url, 'POST', route, validBody(route, { stop: [5] })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'stop[0]' }, `${route} number`);
    }
  });

  it('a stop string past MAX_STOP_CHARS (a string or an item; Anthropic stop_sequences too) → 400 naming the limit', async () => {
    const long = 'y'.repeat(MAX_STOP_CHARS + 1);
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['/v1/chat/completions', { stop: long }, 'stop'],
      ['/v1/chat/completions', { stop: ['ok', long] }, 'stop[1]'],
      ['/v1/completions', { stop: 'x'.repeat(200_000) }, 'stop'],
      ['/v1/messages', { stop_sequences: [long] }, 'stop_sequences[0]'],
    ];
    for (const [route, extra, param] of cases) {
      expectRefused(await send(server().url, 'POST', route, validBody(route as '/v1/messages', extra)), 400, { code: 'KVT_ERR_REQUEST_INVALID', param, mentions: new RegExp(`more than ${MAX_STOP_CHARS} characters`) }, `${route} ${param}`);
    }
    expect((await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { stop_sequences: ['z'.repeat(MAX_STOP_CHARS)] }))).status).toBe(200);
    expectRefused(await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { stop_sequences: Array(17).fill('s') })), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'stop_sequences', mentions: /more than 16 items/ });
    await expectStillServes(server().url);
  });
});
