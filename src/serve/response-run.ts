/**
 * One Responses API generation as its stream of events (response.created …
 * response.completed), kept in a log with sequence numbers so any number of
 * readers can follow it from any point: the POST that streams it, a
 * background run's `GET /v1/responses/{id}?stream=true&starting_after=N`,
 * or nobody (a non-streamed POST only awaits the end).
 *
 * `driveResponse` turns the inference service's events (reasoning, text,
 * end) into the reference's event sequence and the response's output items;
 * the route decides what the end, an error or a cancel does to the record.
 */
import type { FastifyReply } from 'fastify';

import { functionCallItem, outputTextPart, reasoningToken, responseObject, type ResponseShape, type ResponsesOutputItem } from '../recipe/index.ts';
import type { GenerateEvent } from './inference-service.ts';
import { responseId } from './routes/common.ts';
import { clientGone, SseWriter } from './sse.ts';

export type EndEvent = Extract<GenerateEvent, { type: 'end' }>;
export type RunEvent = { type: string; sequence_number: number } & Record<string, unknown>;

export class ResponseRun {
  readonly log: RunEvent[] = [];
  /** Aborting it stops the generation (the engine frees the sequence). */
  readonly abort = new AbortController();
  finished = false;
  /** Set by cancel: the generation's abort is a cancel, not a failure. */
  cancelled = false;
  /** Set by DELETE: the run's end must not write the record back. */
  deleted = false;
  /** Resolves when the run has finished (its record settled). */
  readonly done: Promise<void>;
  private markDone!: () => void;
  private readonly waiters = new Set<() => void>();

  constructor(
    readonly tenant: string,
    readonly shape: ResponseShape,
    /** Reasoning items carry encrypted_content (include). */
    readonly reasoningTokens: boolean,
  ) {
    this.done = new Promise((resolve) => (this.markDone = resolve));
  }

  emit(type: string, fields: Record<string, unknown>): void {
    this.log.push({ type, sequence_number: this.log.length, ...fields });
    this.wake();
  }

  /** The response object now (for created / in_progress / completed events and GET). */
  snapshot(): Record<string, unknown> {
    return responseObject(this.shape);
  }

  finish(): void {
    this.finished = true;
    this.markDone();
    this.wake();
  }

  /** The events after sequence number `startingAfter`, then each new one as it comes, until the run finishes or `stop` fires. */
  async *follow(startingAfter: number, stop?: AbortSignal): AsyncGenerator<RunEvent> {
    let next = Math.max(0, startingAfter + 1);
    let wake: (() => void) | null = null;
    const onStop = () => wake?.();
    stop?.addEventListener('abort', onStop, { once: true });
    try {
      for (;;) {
        while (next < this.log.length) yield this.log[next++];
        if (this.finished || stop?.aborted) return;
        await new Promise<void>((resolve) => {
          wake = resolve;
          this.waiters.add(resolve);
        });
      }
    } finally {
      stop?.removeEventListener('abort', onStop);
    }
  }

  private wake(): void {
    const waiters = [...this.waiters];
    this.waiters.clear();
    for (const wake of waiters) wake();
  }
}

/** How long a finished background run's event log stays readable by GET ?stream=true. */
const KEEP_FINISHED_MS = 60_000;

/** This process's background runs, by tenant + id (cancel and resumed streams reach them here). */
export class ResponseRuns {
  private readonly runs = new Map<string, ResponseRun>();

  add(run: ResponseRun): void {
    this.runs.set(keyOf(run.tenant, run.shape.id), run);
  }

  get(tenant: string, id: string): ResponseRun | undefined {
    return this.runs.get(keyOf(tenant, id));
  }

  /** A finished run is dropped a while later. */
  retire(run: ResponseRun): void {
    setTimeout(() => this.runs.delete(keyOf(run.tenant, run.shape.id)), KEEP_FINISHED_MS).unref();
  }

  /** Server shutdown: stop every run still going. */
  abortAll(): void {
    for (const run of this.runs.values()) if (!run.finished) run.abort.abort();
  }
}

function keyOf(tenant: string, id: string): string {
  return `${tenant}\u0000${id}`;
}

/**
 * Runs the generation's events into `run`: output items on its shape, the
 * reference's stream events in its log; `onEnd` settles the record before
 * the final response.completed / response.incomplete event. Throws what the
 * generation throws (the caller owns failure and cancel).
 */
export async function driveResponse(run: ResponseRun, steps: AsyncIterator<GenerateEvent>, first: IteratorResult<GenerateEvent>, onEnd: (end: EndEvent) => Promise<void>): Promise<EndEvent | null> {
  const { shape } = run;
  const emit = (type: string, fields: Record<string, unknown>) => run.emit(type, fields);
  let thought: { id: string; index: number; text: string } | null = null;
  const closeThought = () => {
    if (thought === null) return;
    const part = { type: 'reasoning_text' as const, text: thought.text };
    const item: ResponsesOutputItem = { type: 'reasoning', id: thought.id, summary: [], content: [part], status: 'completed', ...(run.reasoningTokens ? { encrypted_content: reasoningToken(thought.text) } : {}) };
    emit('response.reasoning_text.done', { item_id: thought.id, output_index: thought.index, content_index: 0, text: thought.text });
    emit('response.content_part.done', { item_id: thought.id, output_index: thought.index, content_index: 0, part });
    emit('response.output_item.done', { output_index: thought.index, item });
    shape.output.push(item);
    thought = null;
  };
  let text: { id: string; index: number; text: string } | null = null;
  const openText = () => {
    if (text !== null) return text;
    closeThought();
    text = { id: responseId('msg_'), index: shape.output.length, text: '' };
    emit('response.output_item.added', { output_index: text.index, item: { type: 'message', id: text.id, status: 'in_progress', role: 'assistant', content: [] } });
    emit('response.content_part.added', { item_id: text.id, output_index: text.index, content_index: 0, part: outputTextPart('') });
    return text;
  };
  let ended: EndEvent | null = null;
  for (let step = first; !step.done; step = await steps.next()) {
    const event = step.value;
    if (event.type === 'start' && shape.status === 'queued') {
      shape.status = 'in_progress';
      emit('response.in_progress', { response: run.snapshot() });
    } else if (event.type === 'reasoning') {
      if (thought === null) {
        thought = { id: responseId('rs_'), index: shape.output.length, text: '' };
        emit('response.output_item.added', { output_index: thought.index, item: { type: 'reasoning', id: thought.id, summary: [], content: [], status: 'in_progress' } });
        // The SDK's stream helper appends deltas to the part this announces.
        emit('response.content_part.added', { item_id: thought.id, output_index: thought.index, content_index: 0, part: { type: 'reasoning_text', text: '' } });
      }
      thought.text += event.text;
      emit('response.reasoning_text.delta', { item_id: thought.id, output_index: thought.index, content_index: 0, delta: event.text });
    } else if (event.type === 'text') {
      const open = openText();
      open.text += event.text;
      emit('response.output_text.delta', { item_id: open.id, output_index: open.index, content_index: 0, delta: event.text, logprobs: [] });
    } else if (event.type === 'end') {
      closeThought();
      // A reply of calls only has no message item; any other reply has one, empty or not.
      const open = text ?? (event.toolCalls.length === 0 ? openText() : null);
      if (open) {
        const part = outputTextPart(open.text);
        const item: ResponsesOutputItem = { type: 'message', id: open.id, status: event.finishReason === 'length' ? 'incomplete' : 'completed', role: 'assistant', content: [part] };
        emit('response.output_text.done', { item_id: open.id, output_index: open.index, content_index: 0, text: open.text, logprobs: [] });
        emit('response.content_part.done', { item_id: open.id, output_index: open.index, content_index: 0, part });
        emit('response.output_item.done', { output_index: open.index, item });
        shape.output.push(item);
      }
      for (const call of event.toolCalls) {
        const item = functionCallItem(call, responseId('fc_'));
        const index = shape.output.length;
        emit('response.output_item.added', { output_index: index, item: { ...item, arguments: '', status: 'in_progress' } });
        emit('response.function_call_arguments.delta', { item_id: item.id, output_index: index, delta: item.arguments });
        emit('response.function_call_arguments.done', { item_id: item.id, output_index: index, name: item.name, arguments: item.arguments });
        emit('response.output_item.done', { output_index: index, item });
        shape.output.push(item);
      }
      shape.reasoningTokens = event.reasoningTokens;
      shape.status = event.finishReason === 'length' ? 'incomplete' : 'completed';
      shape.finishReason = event.finishReason;
      shape.usage = event.usage;
      await onEnd(event);
      emit(shape.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: run.snapshot() });
      ended = event;
    }
  }
  return ended;
}

/** SSE of a run's events after `startingAfter`, until it finishes or the client goes away (the run itself goes on). */
export async function streamRun(reply: FastifyReply, run: ResponseRun, startingAfter: number): Promise<void> {
  const gone = clientGone(reply);
  const sse = new SseWriter(reply);
  sse.start();
  for await (const event of run.follow(startingAfter, gone)) sse.send(event, event.type);
  sse.end();
}
