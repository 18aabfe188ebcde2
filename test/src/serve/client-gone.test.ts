/**
 * clientGone (src/serve/sse.ts): the signal that stops a request's job when
 * its client hangs up. A route creates it only after the prompt is rendered;
 * a client that hung up during that wait closed the response before the
 * signal existed, and its 'close' never comes again — the signal must be
 * aborted from the start, or the job runs to its end for nobody. Real
 * Fastify server and plain sockets.
 */
import { once } from 'node:events';
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

/** Resolves when the signal aborts (at once if it has). */
function aborted(signal: AbortSignal): Promise<void> {
  return signal.aborted ? Promise.resolve() : new Promise((resolve) => signal.addEventListener('abort', () => resolve(), { once: true }));
}

describe('clientGone', () => {
  it('a client that hung up before the signal was made: the signal is aborted at once', async () => {
    let inHandler!: () => void;
    const entered = new Promise<void>((r) => (inHandler = r));
    let seenIt!: (aborted: boolean) => void;
    const seen = new Promise<boolean>((r) => (seenIt = r));
    const port = await serve(async (reply) => {
      inHandler();
      // The prompt is being rendered: the client hangs up meanwhile (its response closes).
      if (!reply.raw.destroyed) await once(reply.raw, 'close');
      expect(reply.raw.destroyed).toBe(true);
      seenIt(clientGone(reply).aborted);
    });
    const socket = await post(port);
    await entered;
    socket.destroy();
    expect(await seen).toBe(true);
  });

  it('a client still there: not aborted until it hangs up', async () => {
    let made!: (signal: AbortSignal) => void;
    const signalMade = new Promise<AbortSignal>((r) => (made = r));
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const port = await serve(async (reply) => {
      const signal = clientGone(reply);
      made(signal);
      await Promise.race([held, aborted(signal)]);
    });
    const socket = await post(port);
    const signal = await signalMade;
    expect(signal.aborted).toBe(false);
    socket.destroy();
    await aborted(signal);
    expect(signal.aborted).toBe(true);
    release();
  });
});
