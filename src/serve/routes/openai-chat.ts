/** POST /v1/chat/completions (OpenAI), streamed or not: its codec for handle-generate.ts. */
import type { FastifyInstance } from 'fastify';

import {
  chatInputFromOpenAi,
  constraintFromOpenAi,
  openAiChatChunk,
  openAiChatResponse,
  openAiToolCall,
  openAiUsageChunk,
  samplingFromOpenAi,
  type OpenAiChatRequestBody,
} from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import { errorBody } from '../http-errors.ts';
import { chatCompletionsBody } from '../schemas.ts';
import { checkToolCallArguments } from '../request-limits.ts';
import { chatSpec } from './chat-spec.ts';
import { checkLogitBias, openAiRetention, responseId } from './common.ts';
import { registerGenerate, sseSink, type Prepared } from './handle-generate.ts';

interface ChatPrepared extends Prepared {
  body: OpenAiChatRequestBody;
  base: { id: string; created: number; model: string; systemFingerprint: string };
}

export function registerOpenAiChat(app: FastifyInstance, ctx: ServeContext): void {
  registerGenerate<OpenAiChatRequestBody, ChatPrepared>(app, ctx, {
    path: '/v1/chat/completions',
    schema: chatCompletionsBody,
    async prepare(request, body) {
      const input = chatInputFromOpenAi(body);
      await checkToolCallArguments(input.messages, ctx.config.maxJsonDepth);
      const { spec, options } = await chatSpec<OpenAiChatRequestBody>(ctx, request, body, input, {
        route: '/v1/chat/completions',
        retention: openAiRetention,
        check: (b) => checkLogitBias(ctx, b.logit_bias),
        sampling: samplingFromOpenAi,
        constraint: constraintFromOpenAi,
      });
      const base = { id: responseId('chatcmpl-'), created: Math.floor(Date.now() / 1000), model: ctx.modelId, systemFingerprint: ctx.fingerprint };
      return { spec, options, stream: body.stream === true, body, base };
    },
    respond: ({ base }, end) =>
      openAiChatResponse({ ...base, content: end.content, reasoning: end.reasoning, reasoningTokens: end.reasoningTokens, toolCalls: end.toolCalls, finishReason: end.finishReason, usage: end.usage }),
    stream: ({ base, body }, reply) =>
      sseSink(reply, {
        open: (sse) => sse.send(openAiChatChunk(base, { role: 'assistant', content: '' }, null)),
        event(sse, event) {
          if (event.type === 'text') sse.send(openAiChatChunk(base, { content: event.text }, null));
          else if (event.type === 'reasoning') sse.send(openAiChatChunk(base, { reasoning_content: event.text }, null));
          else if (event.type === 'end') {
            if (event.toolCalls.length > 0) sse.send(openAiChatChunk(base, { tool_calls: event.toolCalls.map((call, i) => openAiToolCall(call, i)) }, null));
            sse.send(openAiChatChunk(base, {}, event.finishReason));
            if (body.stream_options?.include_usage) sse.send(openAiUsageChunk(base, event.usage, 'chat.completion.chunk', event.reasoning !== null ? event.reasoningTokens : undefined));
          }
        },
        fail: (sse, error) => sse.send(errorBody(error, false)),
        close: (sse) => sse.send('[DONE]'),
      }),
  });
}
