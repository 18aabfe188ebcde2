/** POST /v1/messages (Anthropic Messages), streamed (message_start … message_stop) or not: its codec for handle-generate.ts. */
import type { FastifyInstance } from 'fastify';

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
import type { EndEvent, GenerateEvent } from '../inference-service.ts';
import { messagesBody } from '../schemas.ts';
import type { SseWriter } from '../sse.ts';
import { chatSpec } from './chat-spec.ts';
import { anthropicRetention, responseId } from './common.ts';
import { registerGenerate, sseSink, type Prepared } from './handle-generate.ts';

interface MessagesPrepared extends Prepared {
  id: string;
  wantsThinking: boolean;
}

export function registerAnthropicMessages(app: FastifyInstance, ctx: ServeContext): void {
  registerGenerate<AnthropicRequestBody, MessagesPrepared>(app, ctx, {
    path: '/v1/messages',
    schema: messagesBody,
    async prepare(request, body) {
      const { spec, options } = await chatSpec<AnthropicRequestBody>(ctx, request, body, chatInputFromAnthropic(body), {
        route: '/v1/messages',
        retention: anthropicRetention,
        sampling: samplingFromAnthropic,
        constraint: constraintFromAnthropic,
      });
      return { spec, options, stream: body.stream === true, id: responseId('msg_'), wantsThinking: body.thinking?.type === 'enabled' };
    },
    respond: ({ id, wantsThinking }, end) =>
      anthropicResponse({ id, model: ctx.modelId, content: end.content, thinking: wantsThinking ? end.reasoning : null, toolCalls: end.toolCalls, finishReason: end.finishReason, stopSequence: end.stopSequence, usage: end.usage }),
    stream: (prepared, reply) => {
      const blocks = new MessageBlocks(prepared.id, ctx.modelId, prepared.wantsThinking);
      return sseSink(reply, {
        event: (sse, event) => blocks.event(sse, event),
        fail: (sse, error) => sse.send(errorBody(error, true), 'error'),
      });
    },
  });
}

/** The content blocks of a streamed message: an optional thinking block, a text block, then one per tool call. */
class MessageBlocks {
  private textOpen = false;
  private thinkingOpen = false;
  private index = 0;

  constructor(
    private readonly id: string,
    private readonly model: string,
    private readonly wantsThinking: boolean,
  ) {}

  event(sse: SseWriter, event: GenerateEvent): void {
    if (event.type === 'start') {
      sse.send(anthropicMessageStart(this.id, this.model, { ...event.usage, completionTokens: 0 }), 'message_start');
      sse.send({ type: 'ping' }, 'ping');
    } else if (event.type === 'reasoning') {
      if (!this.wantsThinking) return;
      if (!this.thinkingOpen) {
        sse.send({ type: 'content_block_start', index: this.index, content_block: { type: 'thinking', thinking: '', signature: '' } }, 'content_block_start');
        this.thinkingOpen = true;
      }
      sse.send({ type: 'content_block_delta', index: this.index, delta: { type: 'thinking_delta', thinking: event.text } }, 'content_block_delta');
    } else if (event.type === 'text') {
      this.closeThinking(sse);
      this.openText(sse);
      sse.send({ type: 'content_block_delta', index: this.index, delta: { type: 'text_delta', text: event.text } }, 'content_block_delta');
    } else this.end(sse, event);
  }

  private end(sse: SseWriter, event: EndEvent): void {
    this.closeThinking(sse);
    if (event.toolCalls.length === 0) this.openText(sse);
    if (this.textOpen) {
      sse.send({ type: 'content_block_stop', index: this.index }, 'content_block_stop');
      this.index++;
    }
    for (const call of event.toolCalls) {
      sse.send({ type: 'content_block_start', index: this.index, content_block: { type: 'tool_use', id: toolUseId(call), name: call.function.name, input: {} } }, 'content_block_start');
      sse.send({ type: 'content_block_delta', index: this.index, delta: { type: 'input_json_delta', partial_json: JSON.stringify(argumentsAsObject(call)) } }, 'content_block_delta');
      sse.send({ type: 'content_block_stop', index: this.index }, 'content_block_stop');
      this.index++;
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

  private openText(sse: SseWriter): void {
    if (this.textOpen) return;
    sse.send({ type: 'content_block_start', index: this.index, content_block: { type: 'text', text: '' } }, 'content_block_start');
    this.textOpen = true;
  }

  private closeThinking(sse: SseWriter): void {
    if (!this.thinkingOpen) return;
    sse.send({ type: 'content_block_delta', index: this.index, delta: { type: 'signature_delta', signature: '' } }, 'content_block_delta');
    sse.send({ type: 'content_block_stop', index: this.index }, 'content_block_stop');
    this.thinkingOpen = false;
    this.index++;
  }
}
