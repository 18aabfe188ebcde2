/**
 * Server-sent events on a hijacked reply. The first event of a generation is
 * awaited before the response starts, so anything that fails before the
 * first token (queue full, Redis down, a 4xx from the worker) is still a
 * proper HTTP error; after that a failure is an `error` event.
 */
import type { FastifyReply } from 'fastify';

export class SseWriter {
  private closed = false;

  constructor(private readonly reply: FastifyReply) {}

  start(): void {
    this.reply.hijack();
    const raw = this.reply.raw;
    raw.writeHead(200, {
      'content-type': 'text/event-stream; charset=utf-8',
      'cache-control': 'no-cache',
      connection: 'keep-alive',
      'x-accel-buffering': 'no',
    });
    raw.flushHeaders?.();
    raw.on('close', () => (this.closed = true));
  }

  get isClosed(): boolean {
    return this.closed || this.reply.raw.destroyed;
  }

  /** `data: <json>` (OpenAI) or `event: <name>` + `data: <json>` (Anthropic). */
  send(data: unknown, event?: string): void {
    if (this.isClosed) return;
    const payload = typeof data === 'string' ? data : JSON.stringify(data);
    this.reply.raw.write(`${event ? `event: ${event}\n` : ''}data: ${payload}\n\n`);
  }

  end(): void {
    if (!this.reply.raw.writableEnded) this.reply.raw.end();
  }
}

/** An AbortSignal that fires when the client goes away before the response finished. */
export function clientGone(reply: FastifyReply): AbortSignal {
  const controller = new AbortController();
  // A client that hung up while its prompt was rendered closed the response before this listener existed:
  // its 'close' will not come again, so the request is abandoned now (else its job would run to the end).
  if (reply.raw.destroyed && !reply.raw.writableFinished) {
    controller.abort();
    return controller.signal;
  }
  reply.raw.on('close', () => {
    if (!reply.raw.writableFinished) controller.abort();
  });
  return controller.signal;
}
