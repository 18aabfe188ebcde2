/** POST /v1/completions (OpenAI legacy text completions): the prompt is raw text or token ids, no chat template. Its codec for handle-generate.ts. */
import type { FastifyInstance } from 'fastify';

import { KvtError } from '../../errors.ts';
import { openAiCompletionChunk, openAiCompletionResponse, openAiUsageChunk, samplingFromOpenAi, type OpenAiCompletionRequestBody } from '../../recipe/index.ts';
import { buildSpec } from '../build-spec.ts';
import type { ServeContext } from '../context.ts';
import { errorBody } from '../http-errors.ts';
import { completionsBody } from '../schemas.ts';
import { checkLogitBias, openAiRetention, preamble, responseId } from './common.ts';
import { registerGenerate, sseSink, type Prepared } from './handle-generate.ts';

interface CompletionPrepared extends Prepared {
  body: OpenAiCompletionRequestBody;
  base: { id: string; created: number; model: string; systemFingerprint: string };
}

export function registerOpenAiCompletions(app: FastifyInstance, ctx: ServeContext): void {
  registerGenerate<OpenAiCompletionRequestBody, CompletionPrepared>(app, ctx, {
    path: '/v1/completions',
    schema: completionsBody,
    async prepare(request, body) {
      const { identity, trafficClass } = preamble(ctx, request, body, false);
      const retention = openAiRetention(request, body);
      checkLogitBias(ctx, body.logit_bias);
      if (body.echo) throw new KvtError('KVT_ERR_REQUEST_INVALID', 'echo=true is not supported', { param: 'echo' });
      const sampling = samplingFromOpenAi(body, { defaultMaxTokens: 16, stopTokenIds: ctx.codec.stopTokenIds });
      const promptInput = Array.isArray(body.prompt) && typeof body.prompt[0] === 'string' ? (body.prompt[0] as string) : (body.prompt as string | number[]);
      if (typeof promptInput !== 'string') {
        // Checked before typing: an id past 2^32 would wrap in a Uint32Array.
        const bad = promptInput.find((id) => id >= ctx.vocabSize);
        if (bad !== undefined) throw new KvtError('KVT_ERR_REQUEST_INVALID', `prompt token id ${bad} is outside the vocabulary (${ctx.vocabSize})`, { param: 'prompt' });
      }
      // The client's JSON ids are typed here, at the HTTP boundary, once.
      const tokens = await ctx.prompts.completion(typeof promptInput === 'string' ? promptInput : Uint32Array.from(promptInput), 'prompt');
      const spec = buildSpec({ tokens, sampling, identity, trafficClass, promptParam: 'prompt', retention }, ctx);
      const base = { id: responseId('cmpl-'), created: Math.floor(Date.now() / 1000), model: ctx.modelId, systemFingerprint: ctx.fingerprint };
      return { spec, options: { route: '/v1/completions', parseToolCalls: false, splitReasoning: false }, stream: body.stream === true, body, base };
    },
    respond: ({ base }, end, text) => openAiCompletionResponse(base, text, end.finishReason, end.usage),
    stream: ({ base, body }, reply) =>
      sseSink(reply, {
        event(sse, event) {
          if (event.type === 'text') sse.send(openAiCompletionChunk(base, event.text, null));
          else if (event.type === 'end') {
            sse.send(openAiCompletionChunk(base, '', event.finishReason === 'tool_calls' ? 'stop' : event.finishReason));
            if (body.stream_options?.include_usage) sse.send(openAiUsageChunk(base, event.usage, 'text_completion'));
          }
        },
        fail: (sse, error) => sse.send(errorBody(error, false)),
        close: (sse) => sse.send('[DONE]'),
      }),
  });
}
