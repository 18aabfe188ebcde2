/**
 * Authentication before the body: with KVTIER_API_KEYS set, a request without
 * a valid key gets 401 on every /v1 route whatever its body (malformed,
 * oversized, of another media type, not UTF-8, nested too deep), and /admin/*
 * without the admin token gets 401 likewise. Before, the body was parsed
 * first: bad JSON without a key was 400, a 20 MB body 413.
 */
import { describe, it } from 'vitest';

import { ADMIN_TOKEN, startTestServer } from './server-fixture.ts';
import { expectRefused, expectStillServes, GENERATE_ROUTES, send, validBody } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

const NO_KEY = { authorization: '' };

/** Bodies no route takes, each with the content-type it is sent as. */
function badBodies(maxBodyBytes: number): Array<[string, unknown, Record<string, string>]> {
  return [
    ['malformed JSON', '{"model": ', {}],
    ['empty JSON body', '', {}],
    ['larger than KVTIER_MAX_BODY_BYTES', 'x'.repeat(maxBodyBytes + 1024), {}],
    ['text/plain', 'hello', { 'content-type': 'text/plain' }],
    ['unknown media type', '<a/>', { 'content-type': 'application/xml' }],
    ['not UTF-8', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), {}],
    ['nested 100k deep', '['.repeat(100_000) + ']'.repeat(100_000), {}],
    ['a valid body', validBody('/v1/chat/completions'), {}],
  ];
}

describe('authentication comes before the body', () => {
  it('every generate route: no key → 401 KVT_ERR_AUTH_MISSING_KEY whatever the body', async () => {
    for (const route of GENERATE_ROUTES) {
      for (const [name, body, headers] of badBodies(server().config.maxBodyBytes)) {
        expectRefused(await send(server().url, 'POST', route, body, { ...NO_KEY, ...headers }), 401, { code: 'KVT_ERR_AUTH_MISSING_KEY', param: 'authorization' }, `${route} ${name}`);
      }
    }
    await expectStillServes(server().url);
  });

  it('a wrong key → 401 KVT_ERR_AUTH_BAD_KEY before the body is read', async () => {
    for (const route of GENERATE_ROUTES) {
      const reply = await send(server().url, 'POST', route, '{"model": ', { authorization: 'Bearer sk-nobody' });
      expectRefused(reply, 401, { code: 'KVT_ERR_AUTH_BAD_KEY', param: 'authorization' }, route);
    }
  });

  it('malformed authorization headers → 401 naming authorization', async () => {
    const forms: Array<[string, Record<string, string>, string]> = [
      ['Basic scheme', { authorization: 'Basic c2stYWxpY2U6' }, 'KVT_ERR_AUTH_MISSING_KEY'],
      ['Bearer without a key', { authorization: 'Bearer ' }, 'KVT_ERR_AUTH_MISSING_KEY'],
      ['a bare key', { authorization: 'sk-alice' }, 'KVT_ERR_AUTH_MISSING_KEY'],
      ['a key with a space inside', { authorization: 'Bearer sk-al ice' }, 'KVT_ERR_AUTH_BAD_KEY'],
      ['an 8 KB key', { authorization: `Bearer ${'k'.repeat(8192)}` }, 'KVT_ERR_AUTH_BAD_KEY'],
      ['an empty x-api-key', { authorization: '', 'x-api-key': '' }, 'KVT_ERR_AUTH_MISSING_KEY'],
    ];
    for (const [name, headers, code] of forms) {
      const reply = await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions'), headers);
      expectRefused(reply, 401, { code, param: 'authorization' }, name);
    }
    await expectStillServes(server().url);
  });

  it('stored responses: GET, input_items, DELETE and cancel without a key → 401 (cancel with a malformed body too)', async () => {
    const calls: Array<[string, string, unknown]> = [
      ['GET', '/v1/responses/resp_x', undefined],
      ['GET', '/v1/responses/resp_x?stream=true&starting_after=-5', undefined],
      ['GET', '/v1/responses/resp_x/input_items?limit=1e9', undefined],
      ['DELETE', '/v1/responses/resp_x', undefined],
      ['POST', '/v1/responses/resp_x/cancel', undefined],
      ['POST', '/v1/responses/resp_x/cancel', '{"broken'],
      ['POST', '/v1/responses/resp_x/cancel', 'x'.repeat(server().config.maxBodyBytes + 1)],
      ['GET', '/v1/models', undefined],
    ];
    for (const [method, path, body] of calls) {
      expectRefused(await send(server().url, method, path, body, NO_KEY), 401, { code: 'KVT_ERR_AUTH_MISSING_KEY', param: 'authorization' }, `${method} ${path}`);
    }
  });

  it('/admin/*: no admin token → 401 whatever the body; an API key is not an admin token', async () => {
    const calls: Array<[string, string, unknown]> = [
      ['PUT', '/admin/policy', '{"broken'],
      ['PUT', '/admin/policy', 'x'.repeat(server().config.maxBodyBytes + 1)],
      ['POST', '/admin/policy/edit', Buffer.from([0xff])],
      ['POST', '/admin/gc', '[[[[[[[['],
      ['POST', '/admin/blocks/purge', '{"tenant": 5}'],
      ['GET', '/admin/stats', undefined],
      ['GET', '/admin/blocks/%00', undefined],
    ];
    for (const [method, path, body] of calls) {
      expectRefused(await send(server().url, method, path, body, NO_KEY), 401, { code: 'KVT_ERR_AUTH_ADMIN_TOKEN', param: 'authorization' }, `${method} ${path}`);
    }
    // A path that does not percent-decode matches no route: 400 naming the url, in the JSON error body (Fastify's own body before).
    expectRefused(await send(server().url, 'GET', '/admin/blocks/%ff', undefined, NO_KEY), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'url' }, 'bad url');
    const withApiKey = await send(server().url, 'GET', '/admin/stats');
    expectRefused(withApiKey, 401, { code: 'KVT_ERR_AUTH_ADMIN_TOKEN' }, 'api key on admin');
    // With the token, the same malformed body is a 400 naming the JSON.
    expectRefused(await send(server().url, 'PUT', '/admin/policy', '{"broken', { authorization: `Bearer ${ADMIN_TOKEN}` }), 400, { code: 'KVT_ERR_REQUEST_BAD_JSON' }, 'admin bad json');
    await expectStillServes(server().url);
  });
});
