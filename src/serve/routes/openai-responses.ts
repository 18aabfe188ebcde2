/**
 * POST /v1/responses (OpenAI Responses API), streamed or not; GET and DELETE
 * /v1/responses/{id} for stored responses.
 *
 * A request becomes the Chat Completions transcript of the same conversation
 * (instructions → system, then the chained history, then this input) and goes
 * through the same prompt builder, so it renders the same tokens, and a
 * chained turn's prompt starts with the previous turn's prompt + reply: its
 * cached tokens grow turn after turn.
 */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { describeError, KvtError } from '../../errors.ts';
import { templateKwargsOf } from '../../recipe/reasoning.ts';
import { RetentionPolicy, type RetentionPolicyDoc } from '../../kvtier/index.ts';
import {
  constraintFromResponses,
  functionCallItem,
  messagesFromOutput,
  outputTextPart,
  responseObject,
  responsesInput,
  responsesParamNames,
  responsesTranscript,
  samplingFromResponses,
  type ResponseShape,
  type ResponsesOutputItem,
  type ResponsesRequestBody,
} from '../../recipe/responses-format.ts';
import type { ChatMessage } from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import type { GenerateEvent, GenerateRequest, SampledReply } from '../inference-service.ts';
import { MemoryResponseStore, RedisResponseStore, type ResponseStore } from '../response-store.ts';
import { responsesBody } from '../schemas.ts';
import { clientGone, SseWriter } from '../sse.ts';
import { checkToolCallArguments, generatePreflight, requestIdentity } from '../request-limits.ts';
import { preamble, responseId, setTimingHeaders } from './common.ts';

type EndEvent = Extract<GenerateEvent, { type: 'end' }>;

/** How long a fetched retention policy is trusted for the TTL of new records. */
const POLICY_REFRESH_MS = 2000;

export function registerOpenAiResponses(app: FastifyInstance, ctx: ServeContext): void {
  const store: ResponseStore = ctx.config.redisUrl ? new RedisResponseStore(ctx.config.redisUrl, (level, message) => app.log[level](message)) : new MemoryResponseStore();
  app.addHook('onClose', async () => store.close());
  let policy: { value: RetentionPolicy; at: number } | null = null;
  const ttlMs = async (trafficClass: string, tenant: string): Promise<number> => {
    // A class the cached policy does not know yet was just added: fetch again rather than fall back to the default class.
    if (policy === null || Date.now() - policy.at > POLICY_REFRESH_MS || !policy.value.hasClass(trafficClass)) {
      policy = { value: new RetentionPolicy((await ctx.runner.admin({ op: 'getPolicy' })) as RetentionPolicyDoc), at: Date.now() };
    }
    return policy.value.ttlMs(trafficClass, tenant);
  };

  app.post('/v1/responses', { schema: { body: responsesBody }, preValidation: generatePreflight(ctx) }, async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as ResponsesRequestBody;
    const input = responsesInput(body);
    const { identity, trafficClass } = preamble(ctx, request, body, input.agentic);
    let history: ChatMessage[] = [];
    let historySampled: SampledReply[] = [];
    if (body.previous_response_id) {
      const previous = await store.get(identity.tenant, body.previous_response_id);
      if (!previous) throw notFound(body.previous_response_id, 'previous_response_id');
      history = previous.transcript;
      historySampled = previous.sampled ?? [];
      ctx.service.rememberReplies(identity.scope, historySampled);
    }
    const messages = responsesTranscript(input.instructions, history, input.inputMessages);
    if (messages.length === 0) throw new KvtError('KVT_ERR_REQUEST_EMPTY_PROMPT', 'input is empty and there is no previous_response_id: send at least one input item', { param: 'input' });
    await checkToolCallArguments(messages, ctx.config.maxJsonDepth);
    const sampling = samplingFromResponses(body, { defaultMaxTokens: ctx.defaultMaxTokens });
    const constraint = constraintFromResponses(body, input.tools);
    const prompt = await ctx.prompts.chat(messages, input.tools, identity.scope, 'input', templateKwargsOf(body));
    const generateRequest: GenerateRequest = {
      route: '/v1/responses',
      tokens: prompt.tokens,
      sampling,
      identity,
      trafficClass,
      parseToolCalls: input.tools !== undefined,
      promptParam: 'input',
      constraint,
    };
    try {
      ctx.service.check(generateRequest);
    } catch (error) {
      throw responsesParamNames(error);
    }
    const shape: ResponseShape = {
      id: responseId('resp_'),
      createdAt: Math.floor(Date.now() / 1000),
      model: ctx.modelId,
      body,
      status: 'in_progress',
      output: [],
      finishReason: null,
      usage: null,
      store: body.store !== false,
    };
    const remember = async (end: EndEvent): Promise<void> => {
      shape.reasoningTokens = end.reasoningTokens;
      shape.status = end.finishReason === 'length' ? 'incomplete' : 'completed';
      shape.finishReason = end.finishReason;
      shape.usage = end.usage;
      if (!shape.store) return;
      const transcript = [...history, ...input.inputMessages, ...messagesFromOutput(shape.output)];
      await store.put(identity.tenant, shape.id, { response: responseObject(shape), transcript, sampled: [...historySampled, ...end.sampled] }, await ttlMs(trafficClass, identity.tenant));
    };
    const generation = ctx.service.generate(generateRequest, clientGone(reply));
    const first = await generation.next();
    if (!body.stream) {
      let end: EndEvent | null = null;
      for (let step = first; !step.done; step = await generation.next()) if (step.value.type === 'end') end = step.value;
      shape.output = outputItems(end!);
      await remember(end!);
      setTimingHeaders(reply, end!);
      return responseObject(shape);
    }
    const sse = new SseWriter(reply);
    sse.start();
    let sequence = 0;
    const emit = (type: string, fields: Record<string, unknown>) => sse.send({ type, sequence_number: sequence++, ...fields }, type);
    emit('response.created', { response: responseObject(shape) });
    emit('response.in_progress', { response: responseObject(shape) });
    let thought: { id: string; index: number; text: string } | null = null;
    const closeThought = () => {
      if (thought === null) return;
      const part = { type: 'reasoning_text' as const, text: thought.text };
      const item: ResponsesOutputItem = { type: 'reasoning', id: thought.id, summary: [], content: [part], status: 'completed' };
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
    try {
      for (let step = first; !step.done; step = await generation.next()) {
        const event = step.value;
        if (event.type === 'reasoning') {
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
          await remember(event);
          emit(shape.status === 'incomplete' ? 'response.incomplete' : 'response.completed', { response: responseObject(shape) });
        }
      }
    } catch (error) {
      const described = describeError(error);
      ctx.metrics.errors.inc({ code: described.code });
      request.log.warn({ code: described.code }, `stream failed after it started: ${described.message}`);
      emit('error', { code: described.code, message: described.message, param: described.param ?? null });
    }
    sse.end();
    return reply;
  });

  app.get('/v1/responses/:id', async (request: FastifyRequest<{ Params: { id: string } }>) => {
    const identity = requestIdentity(ctx, request);
    const record = await store.get(identity.tenant, request.params.id);
    if (!record) throw notFound(request.params.id, 'id');
    return record.response;
  });

  app.delete('/v1/responses/:id', async (request: FastifyRequest<{ Params: { id: string } }>) => {
    const identity = requestIdentity(ctx, request);
    if (!(await store.delete(identity.tenant, request.params.id))) throw notFound(request.params.id, 'id');
    return { id: request.params.id, object: 'response.deleted', deleted: true };
  });
}

/** A finished generation → the Response's output items (a message unless the reply is calls only, then one function_call per call). */
function outputItems(end: EndEvent): ResponsesOutputItem[] {
  const items: ResponsesOutputItem[] = [];
  if (end.reasoning !== null) items.push({ type: 'reasoning', id: responseId('rs_'), summary: [], content: [{ type: 'reasoning_text', text: end.reasoning }], status: 'completed' });
  if (end.content !== '' || end.toolCalls.length === 0) {
    items.push({ type: 'message', id: responseId('msg_'), status: end.finishReason === 'length' ? 'incomplete' : 'completed', role: 'assistant', content: [outputTextPart(end.content)] });
  }
  for (const call of end.toolCalls) items.push(functionCallItem(call, responseId('fc_')));
  return items;
}

function notFound(id: string, param: string): KvtError {
  return new KvtError('KVT_ERR_RESPONSE_NOT_FOUND', `no stored response "${id}" for this API key`, { param });
}
