/** POST /v1/completions (OpenAI legacy text completions): the prompt is raw text or token ids, no chat template. */
import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';

import { describeError } from '../../errors.ts';
import { openAiCompletionChunk, openAiCompletionResponse, openAiUsageChunk, samplingFromOpenAi, type OpenAiCompletionRequestBody } from '../../recipe/index.ts';
import type { ServeContext } from '../context.ts';
import { errorBody } from '../http-errors.ts';
import type { GenerateEvent } from '../inference-service.ts';
import { completionsBody } from '../schemas.ts';
import { clientGone, SseWriter } from '../sse.ts';
import { generatePreflight } from '../request-limits.ts';
import { checkLogitBias, openAiRetention, preamble, responseId, setTimingHeaders } from './common.ts';
import { KvtError } from '../../errors.ts';

export function registerOpenAiCompletions(app: FastifyInstance, ctx: ServeContext): void {
  app.post('/v1/completions', { schema: { body: completionsBody }, preValidation: generatePreflight(ctx) }, async (request: FastifyRequest, reply: FastifyReply) => {
    const body = request.body as OpenAiCompletionRequestBody;
    const { identity, trafficClass } = preamble(ctx, request, body, false);
    const retention = openAiRetention(request, body);
    checkLogitBias(ctx, body.logit_bias);
    if (body.echo) throw new KvtError('KVT_ERR_REQUEST_INVALID', 'echo=true is not supported', { param: 'echo' });
    const sampling = samplingFromOpenAi(body, { defaultMaxTokens: 16 });
    const promptInput = Array.isArray(body.prompt) && typeof body.prompt[0] === 'string' ? (body.prompt[0] as string) : (body.prompt as string | number[]);
    if (typeof promptInput !== 'string') {
      // Checked before typing: an id past 2^32 would wrap in a Uint32Array.
      const bad = promptInput.find((id) => id >= ctx.vocabSize);
      if (bad !== undefined) throw new KvtError('KVT_ERR_REQUEST_INVALID', `prompt token id ${bad} is outside the vocabulary (${ctx.vocabSize})`, { param: 'prompt' });
    }
    // The client's JSON ids are typed here, at the HTTP boundary, once.
    const tokens = await ctx.prompts.completion(typeof promptInput === 'string' ? promptInput : Uint32Array.from(promptInput), 'prompt');
    const base = { id: responseId('cmpl-'), created: Math.floor(Date.now() / 1000), model: ctx.modelId, systemFingerprint: ctx.fingerprint };
    const generation = ctx.service.generate(
      { route: '/v1/completions', tokens, sampling, identity, trafficClass, parseToolCalls: false, splitReasoning: false, promptParam: 'prompt', retention },
      clientGone(reply),
    );
    const first = await generation.next();
    if (!body.stream) {
      let text = '';
      let end: Extract<GenerateEvent, { type: 'end' }> | null = null;
      for (let step = first; !step.done; step = await generation.next()) {
        if (step.value.type === 'text') text += step.value.text;
        if (step.value.type === 'end') end = step.value;
      }
      setTimingHeaders(reply, end!);
      return openAiCompletionResponse(base, text, end!.finishReason, end!.usage);
    }
    const sse = new SseWriter(reply);
    sse.start();
    try {
      for (let step = first; !step.done; step = await generation.next()) {
        const event = step.value;
        if (event.type === 'text') sse.send(openAiCompletionChunk(base, event.text, null));
        else if (event.type === 'end') {
          sse.send(openAiCompletionChunk(base, '', event.finishReason === 'tool_calls' ? 'stop' : event.finishReason));
          if (body.stream_options?.include_usage) sse.send(openAiUsageChunk(base, event.usage, 'text_completion'));
        }
      }
    } catch (error) {
      ctx.metrics.errors.inc({ code: describeError(error).code });
      sse.send(errorBody(describeError(error), false));
    }
    sse.send('[DONE]');
    sse.end();
    return reply;
  });
}
