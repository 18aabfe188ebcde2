/**
 * A body past KVTIER_MAX_BODY_BYTES (a 20 MB one) is answered 413 with the
 * JSON error on every route, and the client reads it: the server does not
 * close with the rest of the body unread (which made the kernel reset the
 * connection, so a client that writes its whole body before reading got EPIPE
 * and no status). The client here is a plain socket that writes the whole
 * body, then reads, as Python's requests or curl do; with and without
 * `Connection: close`, with Content-Length and chunked.
 */
import { connect } from 'node:net';

import { describe, expect, it } from 'vitest';

import { ADMIN_TOKEN, KEYS, startTestServer } from './server-fixture.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startTestServer(), (s) => s.close());

interface Outcome {
  response: string;
  socketError: string | null;
}

/** Writes the request head and all of `body` (chunked: in 64 KiB chunks), then reads until the server closes. */
function sendAll(url: string, method: string, path: string, body: string, options: { close: boolean; chunked: boolean; auth: string }): Promise<Outcome> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve) => {
    const socket = connect({ host: hostname, port: Number(port) });
    const chunks: Buffer[] = [];
    let socketError: string | null = null;
    socket.on('data', (chunk: Buffer) => chunks.push(chunk));
    socket.on('error', (error: NodeJS.ErrnoException) => (socketError = error.code ?? error.message));
    socket.on('close', () => resolve({ response: Buffer.concat(chunks).toString('utf8'), socketError }));
    const framing = options.chunked ? 'transfer-encoding: chunked\r\n' : `content-length: ${Buffer.byteLength(body)}\r\n`;
    socket.write(`${method} ${path} HTTP/1.1\r\nhost: ${hostname}\r\n${options.close ? 'connection: close\r\n' : ''}authorization: Bearer ${options.auth}\r\ncontent-type: application/json\r\n${framing}\r\n`);
    if (options.chunked) {
      for (let i = 0; i < body.length; i += 65536) {
        const part = body.slice(i, i + 65536);
        socket.write(`${Buffer.byteLength(part).toString(16)}\r\n${part}\r\n`);
      }
      socket.write('0\r\n\r\n');
    } else {
      socket.write(body);
    }
  });
}

const TWENTY_MB = JSON.stringify({ model: 'synthetic:tiny', max_tokens: 4, messages: [{ role: 'user', content: 'x'.repeat(20 * 1024 * 1024) }] });

const ROUTES: Array<[string, string, string]> = [
  ['POST', '/v1/chat/completions', KEYS.alice],
  ['POST', '/v1/completions', KEYS.alice],
  ['POST', '/v1/messages', KEYS.alice],
  ['POST', '/v1/responses', KEYS.alice],
  ['POST', '/v1/responses/resp_x/cancel', KEYS.alice],
  ['POST', '/admin/policy/edit', ADMIN_TOKEN],
  ['PUT', '/admin/policy', ADMIN_TOKEN],
  ['POST', '/admin/blocks/purge', ADMIN_TOKEN],
  ['POST', '/no/such/route', KEYS.alice],
];

describe('a 20 MB body', () => {
  it('is answered 413 with the JSON error on every route, read by a client that writes it all first, never a reset', async () => {
    for (const [method, path, auth] of ROUTES) {
      for (const close of [false, true]) {
        for (const chunked of [false, true]) {
          const label = `${method} ${path} close=${close} chunked=${chunked}`;
          const { response, socketError } = await sendAll(server().url, method, path, TWENTY_MB, { close, chunked, auth });
          expect(socketError, label).toBeNull();
          expect(response, label).toMatch(/^HTTP\/1\.1 413 /);
          expect(response, label).toMatch(/\r\ncontent-type: application\/json/i);
          const json = JSON.parse(response.slice(response.indexOf('\r\n\r\n') + 4)) as { type?: string; error: { code: string; message: string } };
          expect(json.error.code, label).toBe('KVT_ERR_REQUEST_TOO_LARGE');
          expect(json.error.message, label).toContain('KVTIER_MAX_BODY_BYTES');
          if (path === '/v1/messages') expect(json.type, label).toBe('error');
        }
      }
    }
    // The server is unharmed: a normal request on a new connection is served.
    const reply = await fetch(`${server().url}/v1/chat/completions`, { method: 'POST', headers: { authorization: `Bearer ${KEYS.alice}`, 'content-type': 'application/json' }, body: JSON.stringify({ model: 'synthetic:tiny', max_tokens: 2, messages: [{ role: 'user', content: 'hi' }] }) });
    expect(reply.status).toBe(200);
  }, 240_000);
});
