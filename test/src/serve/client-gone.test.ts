/**
 * clientGone (src/serve/sse.ts): the signal that stops a request's job when
 * its client hangs up. A route creates it only after the prompt is rendered;
 * a client that hung up during that wait closed the response before the
 * signal existed, and its 'close' never comes again — the signal must be
 * aborted from the start, or the job runs to its end for nobody. Real
 * Fastify server and plain sockets.
 */
import { connect } from 'node:net';

import Fastify, { type FastifyInstance } from 'fastify';
import { afterEach, describe, expect, it } from 'vitest';

import { clientGone } from '../../../src/serve/sse.ts';

let app: FastifyInstance | undefined;
afterEach(async () => app?.close());

/** Starts a server whose one route hands its reply to `handle`; returns its port. */
async function serve(handle: (reply: Parameters<typeof clientGone>[0]) => Promise<void>): Promise<number> {
  app = Fastify();
  app.post('/x', async (_request, reply) => {
    await handle(reply);
    return { ok: true };
  });
  await app.listen({ port: 0, host: '127.0.0.1' });
  const address = app.server.address();
  return typeof address === 'object' && address !== null ? address.port : 0;
}

/** Sends one whole POST on a plain socket; the socket is returned open. */
function post(port: number): Promise<ReturnType<typeof connect>> {
  const body = '{"a":1}';
  return new Promise((resolve, reject) => {
    const socket = connect({ host: '127.0.0.1', port }, () => {
      socket.write(`POST /x HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\ncontent-length: ${body.length}\r\n\r\n${body}`, () => resolve(socket));
    });
    socket.on('error', reject);
  });
}

/** Waits (bounded: 400 turns of the event loop after short pauses) until `done` holds. */
async function until(done: () => boolean): Promise<void> {
  for (let i = 0; i < 400 && !done(); i++) await new Promise((r) => setTimeout(r, 5));
}

describe('clientGone', () => {
  it('a client that hung up before the signal was made: the signal is aborted at once', async () => {
    let inHandler!: () => void;
    const entered = new Promise<void>((r) => (inHandler = r));
    let seen: boolean | undefined;
    const port = await serve(async (reply) => {
      inHandler();
      // The prompt is being rendered: the client hangs up meanwhile.
      await until(() => reply.raw.destroyed);
      expect(reply.raw.destroyed).toBe(true);
      seen = clientGone(reply).aborted;
    });
    const socket = await post(port);
    await entered;
    socket.destroy();
    await until(() => seen !== undefined);
    expect(seen).toBe(true);
  });

  it('a client still there: not aborted until it hangs up', async () => {
    let signal: AbortSignal | undefined;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const port = await serve(async (reply) => {
      signal = clientGone(reply);
      await Promise.race([held, until(() => signal!.aborted)]);
    });
    const socket = await post(port);
    await until(() => signal !== undefined);
    expect(signal!.aborted).toBe(false);
    socket.destroy();
    await until(() => signal!.aborted);
    expect(signal!.aborted).toBe(true);
    release();
  });
});
