/** POST /v1/chat/completions (OpenAI), streamed or not. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

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
import { describeError } from '../../errors.ts';
import { templateKwargsOf } from '../../recipe/reasoning.ts';
import type { ServeContext } from '../context.ts';
import { errorBody } from '../http-errors.ts';
import type { GenerateEvent } from '../inference-service.ts';
import { chatCompletionsBody } from '../schemas.ts';
import { clientGone, SseWriter } from '../sse.ts';
import { checkToolCallArguments, generatePreflight } from '../request-limits.ts';
import { checkLogitBias, openAiRetention, preamble, responseId, setTimingHeaders } from './common.ts';

export function registerOpenAiChat(app: FastifyInstance, ctx: ServeContext): void {
  app.post('/v1/chat/completions', { schema: { body: chatCompletionsBody }, preValidation: generatePreflight(ctx) }, async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as OpenAiChatRequestBody;
    const input = chatInputFromOpenAi(body);
    await checkToolCallArguments(input.messages, ctx.config.maxJsonDepth);
    const { identity, trafficClass } = preamble(ctx, request, body, input.agentic);
    const retention = openAiRetention(request, body);
    checkLogitBias(ctx, body.logit_bias);
    const sampling = samplingFromOpenAi(body, { defaultMaxTokens: ctx.defaultMaxTokens });
    const constraint = constraintFromOpenAi(body, input.tools);
    const prompt = await ctx.prompts.chat(input.messages, input.tools, identity.scope, 'messages', templateKwargsOf(body));
    const generateRequest = {
      route: '/v1/chat/completions',
      tokens: prompt.tokens,
      sampling,
      identity,
      trafficClass,
      parseToolCalls: input.tools !== undefined,
      promptParam: 'messages',
      constraint,
      retention,
    };
    const base = { id: responseId('chatcmpl-'), created: Math.floor(Date.now() / 1000), model: ctx.modelId, systemFingerprint: ctx.fingerprint };
    const generation = ctx.service.generate(generateRequest, clientGone(reply));
    // The first event (or a failure before any output) decides between an HTTP error and a 200.
    const first = await generation.next();
    if (!body.stream) {
      let end: Extract<GenerateEvent, { type: 'end' }> | null = null;
      for (let step = first; !step.done; step = await generation.next()) if (step.value.type === 'end') end = step.value;
      setTimingHeaders(reply, end!);
      return openAiChatResponse({ ...base, content: end!.content, reasoning: end!.reasoning, reasoningTokens: end!.reasoningTokens, toolCalls: end!.toolCalls, finishReason: end!.finishReason, usage: end!.usage });
    }
    const sse = new SseWriter(reply);
    sse.start();
    sse.send(openAiChatChunk(base, { role: 'assistant', content: '' }, null));
    try {
      for (let step = first; !step.done; step = await generation.next()) {
        const event = step.value;
        if (event.type === 'text') sse.send(openAiChatChunk(base, { content: event.text }, null));
        else if (event.type === 'reasoning') sse.send(openAiChatChunk(base, { reasoning_content: event.text }, null));
        else if (event.type === 'end') {
          if (event.toolCalls.length > 0) sse.send(openAiChatChunk(base, { tool_calls: event.toolCalls.map((call, i) => openAiToolCall(call, i)) }, null));
          sse.send(openAiChatChunk(base, {}, event.finishReason));
          if (body.stream_options?.include_usage) sse.send(openAiUsageChunk(base, event.usage, 'chat.completion.chunk', event.reasoning !== null ? event.reasoningTokens : undefined));
        }
      }
    } catch (error) {
      ctx.metrics.errors.inc({ code: describeError(error).code });
      const described = describeError(error);
      request.log.warn({ code: described.code }, `stream failed after it started: ${described.message}`);
      sse.send(errorBody(described, false));
    }
    sse.send('[DONE]');
    sse.end();
    return reply;
  });
}
