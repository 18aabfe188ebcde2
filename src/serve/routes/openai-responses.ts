/**
 * POST /v1/responses (OpenAI Responses API): streamed or not, in the
 * foreground or in the background (`background: true`: the POST answers
 * `queued` at once, the run goes on; GET polls it, POST …/cancel stops it).
 * The stored-response routes (GET, DELETE, input_items, cancel) are in
 * openai-responses-stored.ts.
 *
 * A request becomes the Chat Completions transcript of the same conversation
 * (instructions → system, then the chained history, then this input) and goes
 * through the same prompt builder, so it renders the same tokens, and a
 * chained turn's prompt starts with the previous turn's prompt + reply: its
 * cached tokens grow turn after turn. `truncation: "auto"` drops the oldest
 * items when that transcript does not fit (response-truncation.ts).
 */
import type { FastifyInstance } from 'fastify';

import { describeError, KvtError } from '../../errors.ts';
import type { RequestSpec } from '../../request-spec.ts';
import {
  checkJsonSchema,
  checkResponsesToolOutputs,
  constraintFromResponses,
  harmonyCallStops,
  toolCallFormatOf,
  functionCallItem,
  inputListItems,
  messagesFromOutput,
  outputListItems,
  outputTextPart,
  parseInclude,
  reasoningToken,
  responseObject,
  responsesInput,
  responsesParamNames,
  responsesTranscript,
  samplingFromResponses,
  templateKwargsOf,
  toolCallIds,
  type ChatMessage,
  type ResponseShape,
  type ResponsesListItem,
  type ResponsesOutputItem,
  type ResponsesRequestBody,
} from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import { buildSpec } from '../build-spec.ts';
import type { SampledReply } from '../inference-service.ts';
import { jsonBytes, MemoryResponseStore, recordLimitOf, recordTooLarge, RedisResponseStore, type ResponseStore } from '../response-store.ts';
import { driveResponse, ResponseRun, ResponseRuns, streamRun, type EndEvent } from '../response-run.ts';
import { fitToContext } from '../response-truncation.ts';
import { responsesBody } from '../schemas.ts';
import { checkToolCallArguments } from '../request-limits.ts';
import { openAiRetention, preamble, responseId } from './common.ts';
import { registerGenerate, type Prepared } from './handle-generate.ts';
import { notFound, registerStoredResponses } from './openai-responses-stored.ts';

/** How often a background run looks for a cancel or DELETE that reached another API process. */
const CONTROL_POLL_MS = 200;

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

export function registerOpenAiResponses(app: FastifyInstance, ctx: ServeContext, now: () => number): void {
  const recordLimit = recordLimitOf(ctx.config.responseMemoryBytes);
  const store: ResponseStore = ctx.config.redisUrl
    ? new RedisResponseStore(ctx.config.redisUrl, (level, message) => app.log[level](message), recordLimit)
    : new MemoryResponseStore(now, ctx.config.responseMemoryBytes);
  const runs = new ResponseRuns();
  app.addHook('onClose', async () => {
    runs.abortAll();
    await store.close();
  });
  // A record lives as long as its class's blocks, under the policy as last notified (policy-view.ts).
  const ttlMs = (trafficClass: string, tenant: string): number => ctx.policy.current().ttlMs(trafficClass, tenant);
  registerStoredResponses(app, ctx, store, runs);

  registerGenerate<ResponsesRequestBody, ResponsesPrepared>(app, ctx, {
    path: '/v1/responses',
    schema: responsesBody,
    async prepare(request, body) {
      const include = parseInclude(body.include);
      // As the reference: a background run is polled through its stored record.
      if (body.background === true && body.store === false) throw invalid('background: true needs store: true (a background response is read back by GET /v1/responses/{id}); drop store: false', 'background');
      const input = responsesInput(body);
      const { identity, trafficClass } = preamble(ctx, request, body, input.agentic);
      const retention = openAiRetention(request, body);
      const chain = await chainOf(body, identity.tenant);
      if (chain.previous) ctx.service.rememberReplies(identity.scope, chain.historySampled);
      const inputItems = [...chain.historyItems, ...inputListItems(body.input, responseId, chain.taken)];
      // The record this turn would store holds the chain so far and this input twice (transcript, input items):
      // a chain past the bound is refused before any compute, not after it (the store refuses it at put too).
      if (body.store !== false) {
        const atLeast = chain.previousBytes + 2 * jsonBytes(body.input ?? '');
        if (atLeast > recordLimit) throw recordTooLarge(atLeast, recordLimit, body.previous_response_id ? 'previous_response_id' : 'input');
      }
      checkResponsesToolOutputs(body.input, toolCallIds(chain.history));
      (body.tools ?? []).forEach((tool, index) => {
        if (tool.parameters !== undefined && tool.parameters !== null) checkJsonSchema(tool.parameters, `tools[${index}].parameters`);
      });
      const messages = responsesTranscript(input.instructions, chain.history, input.inputMessages);
      if (messages.length === 0) throw new KvtError('KVT_ERR_REQUEST_EMPTY_PROMPT', 'input is empty and there is no previous_response_id: send at least one input item', { param: 'input' });
      await checkToolCallArguments(messages, ctx.config.maxJsonDepth);
      const requested = samplingFromResponses(body, { defaultMaxTokens: ctx.defaultMaxTokens, stopTokenIds: ctx.codec.stopTokenIds });
      const constraint = constraintFromResponses(body, input.tools, toolCallFormatOf(ctx.codec));
      const sampling = harmonyCallStops(requested, constraint, ctx.codec);
      const render = (kept: ChatMessage[]) => ctx.prompts.chat(kept, input.tools, identity.scope, 'input', templateKwargsOf(body));
      const prompt = body.truncation === 'auto' ? (await fitToContext(messages, render, { contextLength: ctx.contextLength, maxTokens: sampling.maxTokens })).prompt : await render(messages).catch((error: unknown) => Promise.reject(truncationHint(error)));
      let spec: RequestSpec;
      try {
        spec = buildSpec({ tokens: prompt.tokens, sampling, identity, trafficClass, promptParam: 'input', constraint, retention }, ctx);
      } catch (error) {
        throw responsesParamNames(truncationHint(error));
      }
      const shape: ResponseShape = {
        id: responseId('resp_'),
        createdAt: Math.floor(Date.now() / 1000),
        model: ctx.modelId,
        body,
        status: body.background === true ? 'queued' : 'in_progress',
        output: [],
        finishReason: null,
        usage: null,
        store: body.store !== false,
        background: body.background === true,
      };
      /** Writes the record: the response now, and once it ended, the transcript a chained turn continues. */
      const save = async (end: EndEvent | null): Promise<void> => {
        if (!shape.store) return;
        const transcript = end ? [...chain.history, ...input.inputMessages, ...messagesFromOutput(shape.output)] : [];
        const sampled = end ? [...chain.historySampled, ...end.sampled] : [];
        await store.put(identity.tenant, shape.id, { response: responseObject(shape), transcript, sampled, inputItems }, ttlMs(trafficClass, identity.tenant));
      };
      const options = { route: '/v1/responses', parseToolCalls: input.tools !== undefined };
      return { spec, options, stream: body.stream === true, shape, save, withToken: include.reasoningToken };
    },
    detach(prepared, reply) {
      if (!prepared.shape.background) return null;
      return (async () => {
        const { shape, save, spec } = prepared;
        const run = new ResponseRun(spec.tenant, shape, prepared.withToken);
        await save(null);
        runs.add(run);
        run.emit('response.created', { response: run.snapshot() });
        run.emit('response.queued', { response: run.snapshot() });
        const control = () => store.control(spec.tenant, shape.id);
        void runInBackground(run, ctx, prepared, control, async (end) => {
          // A DELETE through another process must not be undone by this run's next write.
          if (!run.deleted && (await control()) !== 'deleted') await save(end);
        }).finally(() => runs.retire(run));
        if (!prepared.stream) return run.snapshot();
        // The stream follows the run; the client going away stops reading, not the run.
        await streamRun(reply, run, -1);
        return reply;
      })();
    },
    async respond({ shape, save, withToken }, end) {
      shape.output = outputItems(end, withToken);
      shape.reasoningTokens = end.reasoningTokens;
      shape.status = end.finishReason === 'length' ? 'incomplete' : 'completed';
      shape.finishReason = end.finishReason;
      shape.usage = end.usage;
      await save(end);
      return responseObject(shape);
    },
    stream({ shape, save, spec, withToken }, reply) {
      const run = new ResponseRun(spec.tenant, shape, withToken);
      run.emit('response.created', { response: run.snapshot() });
      run.emit('response.in_progress', { response: run.snapshot() });
      const streamed = streamRun(reply, run, -1);
      return {
        drive: (steps, first) => driveResponse(run, steps, first, save),
        fail: (error) => run.emit('error', { code: error.code, message: error.message, param: error.param ?? null }),
        async close() {
          run.finish();
          await streamed;
        },
      };
    },
  });

  /** The stored turn a request continues (previous_response_id): its transcript, sampled replies and items. */
  async function chainOf(body: ResponsesRequestBody, tenant: string): Promise<ResponseChain> {
    const chain: ResponseChain = { previous: false, history: [], historySampled: [], taken: new Set<string>(), historyItems: [], previousBytes: 0 };
    if (!body.previous_response_id) return chain;
    const previous = await store.get(tenant, body.previous_response_id);
    if (!previous) throw notFound(body.previous_response_id, 'previous_response_id');
    chain.previous = true;
    chain.previousBytes = jsonBytes(previous);
    const status = previous.response.status as ResponseShape['status'];
    if (status !== 'completed' && status !== 'incomplete') {
      const wait = status === 'queued' || status === 'in_progress' ? ': poll GET /v1/responses/{id} until it is completed' : '';
      throw invalid(`previous_response_id "${body.previous_response_id}" is ${status}; only a completed or incomplete response can be continued${wait}`, 'previous_response_id');
    }
    chain.history = previous.transcript;
    chain.historySampled = previous.sampled ?? [];
    for (const item of previous.inputItems ?? []) chain.taken.add(item.id);
    chain.historyItems = [...(previous.inputItems ?? []), ...outputListItems(previous.response.output as ResponsesOutputItem[], chain.taken)];
    return chain;
  }
}

interface ResponseChain {
  previous: boolean;
  history: ChatMessage[];
  historySampled: SampledReply[];
  taken: Set<string>;
  historyItems: ResponsesListItem[];
  previousBytes: number;
}

interface ResponsesPrepared extends Prepared {
  shape: ResponseShape;
  save: (end: EndEvent | null) => Promise<void>;
  withToken: boolean;
}

/**
 * A background run: queued until the engine takes it, then the same event
 * sequence as a streamed response; a failure or a cancel settles the record
 * as failed / cancelled (response.failed / response.cancelled events).
 */
async function runInBackground(
  run: ResponseRun,
  ctx: ServeContext,
  prepared: ResponsesPrepared,
  control: () => Promise<'run' | 'cancel' | 'deleted'>,
  saveEnd: (end: EndEvent | null) => Promise<void>,
): Promise<void> {
  const { shape } = run;
  const watch = setInterval(() => {
    control().then(
      (what) => {
        if (what === 'run' || run.finished || run.cancelled) return;
        run.deleted = what === 'deleted';
        run.cancelled = true;
        run.abort.abort(new KvtError('KVT_ERR_INTERNAL', `${what === 'deleted' ? 'deleted' : 'cancelled'} through another API process`));
      },
      // A store that cannot answer (Redis down) leaves the run going; the next poll asks again.
      () => undefined,
    );
  }, CONTROL_POLL_MS);
  watch.unref();
  try {
    const generation = ctx.service.generate(prepared.spec, prepared.options, run.abort.signal);
    const first = await generation.next();
    if (!run.cancelled) {
      shape.status = 'in_progress';
      await saveEnd(null);
      run.emit('response.in_progress', { response: run.snapshot() });
    }
    await driveResponse(run, generation, first, saveEnd);
  } catch (error) {
    if (run.cancelled) shape.status = 'cancelled';
    else {
      const described = describeError(error);
      ctx.metrics.errors.inc({ code: described.code });
      shape.status = 'failed';
      shape.error = { code: described.code, message: described.message };
    }
    await saveEnd(null).catch(() => undefined);
    run.emit(run.cancelled ? 'response.cancelled' : 'response.failed', { response: run.snapshot() });
  } finally {
    clearInterval(watch);
    run.finish();
  }
}

/** A finished generation → the Response's output items (a message unless the reply is calls only, then one function_call per call). */
function outputItems(end: EndEvent, withToken: boolean): ResponsesOutputItem[] {
  const items: ResponsesOutputItem[] = [];
  if (end.reasoning !== null) {
    items.push({ type: 'reasoning', id: responseId('rs_'), summary: [], content: [{ type: 'reasoning_text', text: end.reasoning }], status: 'completed', ...(withToken ? { encrypted_content: reasoningToken(end.reasoning) } : {}) });
  }
  if (end.content !== '' || end.toolCalls.length === 0) {
    items.push({ type: 'message', id: responseId('msg_'), status: end.finishReason === 'length' ? 'incomplete' : 'completed', role: 'assistant', content: [outputTextPart(end.content)] });
  }
  for (const call of end.toolCalls) items.push(functionCallItem(call, responseId('fc_')));
  return items;
}

/** truncation "disabled" (the default): a prompt over the context says how to let the server drop old items. */
function truncationHint(error: unknown): unknown {
  if (!(error instanceof KvtError) || error.code !== 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW') return error;
  return new KvtError(error.code, `${error.message}; send truncation: "auto" to drop the oldest input items until it fits`, { param: error.param ?? 'input', cause: error });
}
