/** POST /v1/messages (Anthropic Messages), streamed (message_start … message_stop) or not. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { describeError } from '../../errors.ts';
import { templateKwargsOf } from '../../recipe/reasoning.ts';
import {
  anthropicMessageStart,
  anthropicResponse,
  anthropicStopReason,
  anthropicUsage,
  argumentsAsObject,
  chatInputFromAnthropic,
  constraintFromAnthropic,
  samplingFromAnthropic,
  toolUseId,
  type AnthropicRequestBody,
} from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import { errorBody } from '../http-errors.ts';
import type { GenerateEvent } from '../inference-service.ts';
import { messagesBody } from '../schemas.ts';
import { clientGone, SseWriter } from '../sse.ts';
import { generatePreflight } from '../request-limits.ts';
import { anthropicRetention, preamble, responseId, setTimingHeaders } from './common.ts';

export function registerAnthropicMessages(app: FastifyInstance, ctx: ServeContext): void {
  app.post('/v1/messages', { schema: { body: messagesBody }, preValidation: generatePreflight(ctx) }, async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as AnthropicRequestBody;
    const input = chatInputFromAnthropic(body);
    const { identity, trafficClass } = preamble(ctx, request, body, input.agentic);
    const retention = anthropicRetention(request, body);
    const sampling = samplingFromAnthropic(body, { defaultMaxTokens: ctx.defaultMaxTokens });
    const constraint = constraintFromAnthropic(body, input.tools);
    const prompt = await ctx.prompts.chat(input.messages, input.tools, identity.scope, 'messages', templateKwargsOf(body));
    const id = responseId('msg_');
    const wantsThinking = body.thinking?.type === 'enabled';
    const generation = ctx.service.generate(
      { route: '/v1/messages', tokens: prompt.tokens, sampling, identity, trafficClass, parseToolCalls: input.tools !== undefined, promptParam: 'messages', constraint, retention },
      clientGone(reply),
    );
    const first = await generation.next();
    if (!body.stream) {
      let end: Extract<GenerateEvent, { type: 'end' }> | null = null;
      for (let step = first; !step.done; step = await generation.next()) if (step.value.type === 'end') end = step.value;
      setTimingHeaders(reply, end!);
      return anthropicResponse({ id, model: ctx.modelId, content: end!.content, thinking: wantsThinking ? end!.reasoning : null, toolCalls: end!.toolCalls, finishReason: end!.finishReason, stopSequence: end!.stopSequence, usage: end!.usage });
    }
    const sse = new SseWriter(reply);
    sse.start();
    let textOpen = false;
    let thinkingOpen = false;
    let blockIndex = 0;
    const closeThinking = () => {
      if (!thinkingOpen) return;
      sse.send({ type: 'content_block_delta', index: blockIndex, delta: { type: 'signature_delta', signature: '' } }, 'content_block_delta');
      sse.send({ type: 'content_block_stop', index: blockIndex }, 'content_block_stop');
      thinkingOpen = false;
      blockIndex++;
    };
    try {
      for (let step = first; !step.done; step = await generation.next()) {
        const event = step.value;
        if (event.type === 'start') {
          sse.send(anthropicMessageStart(id, ctx.modelId, { ...event.usage, completionTokens: 0 }), 'message_start');
          sse.send({ type: 'ping' }, 'ping');
        } else if (event.type === 'reasoning') {
          if (!wantsThinking) continue;
          if (!thinkingOpen) {
            sse.send({ type: 'content_block_start', index: blockIndex, content_block: { type: 'thinking', thinking: '', signature: '' } }, 'content_block_start');
            thinkingOpen = true;
          }
          sse.send({ type: 'content_block_delta', index: blockIndex, delta: { type: 'thinking_delta', thinking: event.text } }, 'content_block_delta');
        } else if (event.type === 'text') {
          closeThinking();
          if (!textOpen) {
            sse.send({ type: 'content_block_start', index: blockIndex, content_block: { type: 'text', text: '' } }, 'content_block_start');
            textOpen = true;
          }
          sse.send({ type: 'content_block_delta', index: blockIndex, delta: { type: 'text_delta', text: event.text } }, 'content_block_delta');
        } else {
          closeThinking();
          if (!textOpen && event.toolCalls.length === 0) {
            sse.send({ type: 'content_block_start', index: blockIndex, content_block: { type: 'text', text: '' } }, 'content_block_start');
            textOpen = true;
          }
          if (textOpen) {
            sse.send({ type: 'content_block_stop', index: blockIndex }, 'content_block_stop');
            blockIndex++;
          }
          for (const call of event.toolCalls) {
            sse.send({ type: 'content_block_start', index: blockIndex, content_block: { type: 'tool_use', id: toolUseId(call), name: call.function.name, input: {} } }, 'content_block_start');
            sse.send({ type: 'content_block_delta', index: blockIndex, delta: { type: 'input_json_delta', partial_json: JSON.stringify(argumentsAsObject(call)) } }, 'content_block_delta');
            sse.send({ type: 'content_block_stop', index: blockIndex }, 'content_block_stop');
            blockIndex++;
          }
          const usage = anthropicUsage(event.usage);
          sse.send(
            {
              type: 'message_delta',
              delta: { stop_reason: anthropicStopReason(event.finishReason, event.stopSequence), stop_sequence: event.stopSequence },
              usage: { output_tokens: usage.output_tokens, input_tokens: usage.input_tokens, cache_read_input_tokens: usage.cache_read_input_tokens, cache_creation_input_tokens: usage.cache_creation_input_tokens },
            },
            'message_delta',
          );
          sse.send({ type: 'message_stop' }, 'message_stop');
        }
      }
    } catch (error) {
      ctx.metrics.errors.inc({ code: describeError(error).code });
      sse.send(errorBody(describeError(error), true), 'error');
    }
    sse.end();
    return reply;
  });
}
