/**
 * The one handler of every generate route (chat, completions, messages,
 * responses). A route is its codec: how its body becomes a RequestSpec, and
 * how a generation's events become its response. The handling is the same
 * for all:
 *
 *   body ─ codec.prepare (parse, preamble, prompt, buildSpec) ─▶ spec
 *        ─ codec.detach?  (Responses' background run: answered at once)
 *        ─ service.generate ─ first event ─┬─ fails: the HTTP error (nothing was sent yet)
 *                                          ├─ not streamed: collect to `end` → codec.respond
 *                                          └─ streamed: codec.stream's sink; a failure after the
 *                                             start is the sink's error event
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { describeError, type DescribedError } from '../../errors.ts';
import type { ServeContext } from '../context.ts';
import type { EndEvent, GenerateEvent, GenerateOptions } from '../inference-service.ts';
import type { RequestSpec } from '../../request-spec.ts';
import { generatePreflight } from '../request-limits.ts';
import { clientGone, SseWriter } from '../sse.ts';
import { setTimingHeaders } from './common.ts';

/** What `prepare` hands on: the spec, the generation's options, and whatever the codec needs to answer. */
export interface Prepared {
  spec: RequestSpec;
  options: GenerateOptions;
  stream: boolean;
}

type Steps = AsyncGenerator<GenerateEvent>;

/** Where a streamed generation's events go. */
export interface EventSink {
  /** Every event from `first` on, into the response. */
  drive(steps: Steps, first: IteratorResult<GenerateEvent>): Promise<unknown>;
  /** The generation failed after the response started. */
  fail(error: DescribedError): void;
  close(): Promise<void> | void;
}

export interface GenerateCodec<Body, P extends Prepared> {
  path: string;
  schema: object;
  prepare(request: FastifyRequest, body: Body): Promise<P>;
  /** A run that does not hold the request (a background response): answers it here; null: run it now. */
  detach?(prepared: P, reply: FastifyReply): Promise<unknown> | null;
  /** The non-streamed body from the end event (and the reply's text). */
  respond(prepared: P, end: EndEvent, text: string): unknown;
  stream(prepared: P, reply: FastifyReply): EventSink;
}

export function registerGenerate<Body, P extends Prepared>(app: FastifyInstance, ctx: ServeContext, codec: GenerateCodec<Body, P>): void {
  app.post(codec.path, { schema: { body: codec.schema }, preValidation: generatePreflight(ctx) }, (request: FastifyRequest, reply: FastifyReply) => handleGenerate(ctx, codec, request, reply));
}

export async function handleGenerate<Body, P extends Prepared>(ctx: ServeContext, codec: GenerateCodec<Body, P>, request: FastifyRequest, reply: FastifyReply): Promise<unknown> {
  const prepared = await codec.prepare(request, request.body as Body);
  const detached = codec.detach?.(prepared, reply) ?? null;
  if (detached !== null) return detached;
  const generation = ctx.service.generate(prepared.spec, prepared.options, clientGone(reply));
  // The first event (or a failure before any output) decides between an HTTP error and a 200.
  const first = await generation.next();
  if (!prepared.stream) {
    let text = '';
    let end: EndEvent | null = null;
    for (let step = first; !step.done; step = await generation.next()) {
      if (step.value.type === 'text') text += step.value.text;
      else if (step.value.type === 'end') end = step.value;
    }
    setTimingHeaders(reply, end!);
    return codec.respond(prepared, end!, text);
  }
  const sink = codec.stream(prepared, reply);
  try {
    await sink.drive(generation, first);
  } catch (error) {
    const described = describeError(error);
    ctx.metrics.errors.inc({ code: described.code });
    request.log.warn({ code: described.code }, `stream failed after it started: ${described.message}`);
    sink.fail(described);
  }
  await sink.close();
  return reply;
}

/** A sink writing server-sent events: `open` once, `event` per generation event, `fail`, then `close` (before the stream ends). */
export function sseSink(
  reply: FastifyReply,
  handlers: { open?(sse: SseWriter): void; event(sse: SseWriter, event: GenerateEvent): void; fail(sse: SseWriter, error: DescribedError): void; close?(sse: SseWriter): void },
): EventSink {
  const sse = new SseWriter(reply);
  sse.start();
  handlers.open?.(sse);
  return {
    async drive(steps, first) {
      for (let step = first; !step.done; step = await steps.next()) handlers.event(sse, step.value);
    },
    fail: (error) => handlers.fail(sse, error),
    close() {
      handlers.close?.(sse);
      sse.end();
    },
  };
}
