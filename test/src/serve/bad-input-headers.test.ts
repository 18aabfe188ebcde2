/**
 * Headers and URLs: media types, kvtier's own headers, oversized headers,
 * paths that do not decode, and the routes without a body (models, metrics,
 * health, dashboard assets). Each refusal is a 4xx with a JSON error; none is
 * a 5xx, and the server still answers.
 */
import { connect } from 'node:net';

import { describe, expect, it } from 'vitest';

import { rawRequest } from '../../helpers/raw-http.ts';
import { startTestServer } from './server-fixture.ts';
import { AUTH, expectRefused, expectStillServes, GENERATE_ROUTES, send, validBody } from './bad-input-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

describe('content-type', () => {
  it('media types no route takes → 415 naming application/json; text/plain → 400 naming the body', async () => {
    for (const route of GENERATE_ROUTES) {
      const body = JSON.stringify(validBody(route));
      for (const type of ['application/xml', 'multipart/form-data; boundary=x', 'application/x-www-form-urlencoded', ';;;', 'application/json-patch+json']) {
        expectRefused(await send(server().url, 'POST', route, body, { 'content-type': type }), 415, { code: 'KVT_ERR_REQUEST_UNSUPPORTED_MEDIA' }, `${route} ${type}`);
      }
      const plain = await send(server().url, 'POST', route, body, { 'content-type': 'text/plain' });
      expectRefused(plain, 400, { code: 'KVT_ERR_REQUEST_INVALID', mentions: /^body must be object/ }, `${route} text/plain`);
      // A charset parameter or upper case is still JSON.
      expect((await send(server().url, 'POST', route, body, { 'content-type': 'Application/JSON; charset=utf-8' })).status, route).toBe(200);
    }
    await expectStillServes(server().url);
  });

  it('no body at all, or an empty one → 400 naming the body', async () => {
    for (const route of GENERATE_ROUTES) {
      const reply = await send(server().url, 'POST', route, undefined);
      expect(reply.status, `${route}: ${reply.text.slice(0, 200)}`).toBe(400);
      expectRefused(await send(server().url, 'POST', route, ''), 400, { code: 'KVT_ERR_REQUEST_BAD_JSON' }, `${route} empty`);
    }
  });
});

describe("kvtier's headers", () => {
  it('x-kvtier-class: unknown, empty, 8 kB long → 400 naming the header; a known class is served', async () => {
    for (const value of ['bulk', ' ', 'x'.repeat(8000)]) {
      expectRefused(await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions'), { 'x-kvtier-class': value }), 400, { code: 'KVT_ERR_REQUEST_UNKNOWN_CLASS', param: 'x-kvtier-class' }, value.slice(0, 10));
    }
    const known = await send(server().url, 'POST', '/v1/chat/completions', validBody('/v1/chat/completions'), { 'x-kvtier-class': 'chat' });
    expect(known.status).toBe(200);
    expectRefused(await send(server().url, 'POST', '/v1/messages', validBody('/v1/messages', { kvtier_class: 'bulk' })), 400, { code: 'KVT_ERR_REQUEST_UNKNOWN_CLASS', param: 'kvtier_class' });
  });

  it('x-kvtier-cache other than store / no-store → 400 naming the header', async () => {
    for (const route of GENERATE_ROUTES) {
      expectRefused(await send(server().url, 'POST', route, validBody(route), { 'x-kvtier-cache': 'forever' }), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'x-kvtier-cache' }, route);
    }
  });

  it('headers past the server\'s header limit → 431 with the JSON error, never a reset, and the next request is served', async () => {
    // The client is still sending when the server refuses: closing with its bytes unread would reset the connection
    // (ECONNRESET before the 431 was read: Node 24's client nearly every time). Several rounds, since it is a race.
    for (let round = 0; round < 5; round++) {
      const reply = await rawRequest(server().url, 'POST', '/v1/chat/completions', { headers: { ...AUTH, 'x-filler': 'f'.repeat(64 * 1024) }, body: JSON.stringify(validBody('/v1/chat/completions')) });
      expect(reply.status, `round ${round}`).toBe(431);
      expect(reply.headers).toMatch(/content-type: application\/json/i);
      const error = (JSON.parse(reply.body) as { error: { code: string; param: string | null } }).error;
      expect(error.code).toBe('KVT_ERR_REQUEST_HEADERS_TOO_LARGE');
      expect(error.param).toBe('headers');
    }
    await expectStillServes(server().url);
  });

  it('a request that is not HTTP/1.1 (garbage request line, bad header name) → 400 KVT_ERR_REQUEST_MALFORMED as JSON', async () => {
    for (const raw of ['\u0001\u0002 nonsense\r\n\r\n', 'GET / HTTP/1.1\r\nbad header: x\r\n\r\n']) {
      const text = await new Promise<string>((resolve, reject) => {
        const socket = connect({ host: '127.0.0.1', port: Number(new URL(server().url).port) });
        const chunks: Buffer[] = [];
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('error', reject);
        socket.on('close', () => resolve(Buffer.concat(chunks).toString('utf8')));
        socket.write(raw);
      });
      expect(text, JSON.stringify(raw)).toMatch(/^HTTP\/1\.1 400 /);
      const body = JSON.parse(text.slice(text.indexOf('\r\n\r\n') + 4)) as { error: { code: string } };
      expect(body.error.code).toBe('KVT_ERR_REQUEST_MALFORMED');
    }
    await expectStillServes(server().url);
  });

  it('a refused client that keeps its connection open and keeps sending is cut off after the linger bound', async () => {
    // allowHalfOpen: the server's FIN does not end this side; only the server's linger bound closes it.
    const socket = connect({ host: '127.0.0.1', port: Number(new URL(server().url).port), allowHalfOpen: true });
    const received: Buffer[] = [];
    socket.on('data', (chunk: Buffer) => received.push(chunk));
    const closed = new Promise<void>((resolve) => socket.on('close', () => resolve()));
    socket.on('error', () => {});
    socket.write(`POST /v1/chat/completions HTTP/1.1\r\nhost: x\r\nx-filler: ${'f'.repeat(64 * 1024)}\r\n`);
    // Keeps sending header lines, never ends its side: the server must close it, not read forever.
    const drip = setInterval(() => socket.writable && socket.write(`x-more: ${'m'.repeat(1000)}\r\n`), 50);
    try {
      await closed;
    } finally {
      clearInterval(drip);
    }
    expect(Buffer.concat(received).toString('utf8')).toMatch(/^HTTP\/1\.1 431 /);
    await expectStillServes(server().url);
  });
});

describe('routes without a body', () => {
  it('paths that do not percent-decode → 400 naming the url (JSON error); unknown paths → 404', async () => {
    for (const path of ['/v1/responses/%ff', '/v1/responses/%E0%A4%A/cancel', '/dashboard/assets/%c0%af']) {
      expectRefused(await send(server().url, 'GET', path), 400, { code: 'KVT_ERR_REQUEST_INVALID', param: 'url' }, path);
    }
    for (const path of ['/v1/nope', '/dashboard/assets/..%2f..%2fpackage.json', '/dashboard/assets/__proto__', '/dashboard/assets/constructor']) {
      const reply = await send(server().url, 'GET', path);
      expect(reply.status, `${path}: ${reply.text.slice(0, 200)}`).toBe(404);
      expect(reply.json, path).not.toBeNull();
    }
    const traversal = await rawRequest(server().url, 'GET', '/dashboard/assets/../../../../etc/passwd');
    expect(traversal.status).toBe(404);
    expect(traversal.body).not.toContain('root:');
  });

  it('stored-response routes: ids and query values that are not ids → 4xx, never a 5xx', async () => {
    const paths = [
      '/v1/responses/' + 'r'.repeat(5000),
      '/v1/responses/resp_x?stream=true&starting_after=abc',
      '/v1/responses/resp_x?include[]=bogus',
      '/v1/responses/resp_x/input_items?limit=-1',
      '/v1/responses/resp_x/input_items?order=sideways',
      '/v1/responses/%00',
    ];
    for (const path of paths) {
      const reply = await send(server().url, 'GET', path);
      expect(reply.status, `${path}: ${reply.text.slice(0, 200)}`).toBeGreaterThanOrEqual(400);
      expect(reply.status, path).toBeLessThan(500);
      expect(reply.json, path).not.toBeNull();
    }
    expect((await send(server().url, 'DELETE', '/v1/responses/%00')).status).toBe(404);
    expect((await send(server().url, 'POST', '/v1/responses/resp_x/cancel', '{"x": 1}')).status).toBe(404);
  });

  it('models, metrics and health ignore what they do not read; a method a route does not take is a 404 JSON error', async () => {
    expect((await send(server().url, 'GET', '/v1/models?x=' + 'q'.repeat(4000))).status).toBe(200);
    expect((await send(server().url, 'GET', '/metrics', undefined, { accept: 'application/weird' })).status).toBe(200);
    expect((await send(server().url, 'GET', '/healthz', undefined, { authorization: 'Basic ???' })).status).toBe(200);
    for (const [method, path] of [['DELETE', '/v1/models'], ['PUT', '/v1/chat/completions'], ['GET', '/v1/chat/completions']]) {
      const reply = await send(server().url, method, path);
      expect(reply.status, `${method} ${path}`).toBe(404);
      expect((reply.json!.error as { code: string }).code).toBe('KVT_ERR_ROUTE_NOT_FOUND');
    }
    await expectStillServes(server().url);
  });
});
