/**
 * The request spec of a chat route (OpenAI chat completions, Anthropic
 * messages): both read the same things from their bodies in the same order,
 * each in its own dialect, and template the prompt the same way.
 */
import type { FastifyRequest } from 'fastify';

import { harmonyCallStops, templateKwargsOf, toolCallFormatOf, type ChatInput, type ConstraintSpec } from '../../recipe/index.ts';
import type { CacheRetentionHint, RequestSpec, SamplingSpec } from '../../request-spec.ts';
import { buildSpec } from '../build-spec.ts';
import type { ServeContext } from '../context.ts';
import type { GenerateOptions } from '../inference-service.ts';
import { preamble } from './common.ts';

type ChatBody = { model: string; kvtier_class?: string } & Parameters<typeof templateKwargsOf>[0];

export interface ChatDialect<B extends ChatBody> {
  route: string;
  retention(request: FastifyRequest, body: B): CacheRetentionHint | undefined;
  /** A check beyond the schema, made after the retention hint is read. */
  check?(body: B): void;
  sampling(body: B, limits: { defaultMaxTokens: number; stopTokenIds: readonly number[] }): SamplingSpec;
  constraint(body: B, tools: ChatInput['tools'], format: ReturnType<typeof toolCallFormatOf>): ConstraintSpec | undefined;
}

export async function chatSpec<B extends ChatBody>(ctx: ServeContext, request: FastifyRequest, body: B, input: ChatInput, dialect: ChatDialect<B>): Promise<{ spec: RequestSpec; options: GenerateOptions }> {
  const { identity, trafficClass } = preamble(ctx, request, body, input.agentic);
  const retention = dialect.retention(request, body);
  dialect.check?.(body);
  const requested = dialect.sampling(body, { defaultMaxTokens: ctx.defaultMaxTokens, stopTokenIds: ctx.codec.stopTokenIds });
  const constraint = dialect.constraint(body, input.tools, toolCallFormatOf(ctx.codec));
  const prompt = await ctx.prompts.chat(input.messages, input.tools, identity.scope, 'messages', templateKwargsOf(body));
  const sampling = harmonyCallStops(requested, constraint, ctx.codec);
  const spec = buildSpec({ tokens: prompt.tokens, sampling, identity, trafficClass, promptParam: 'messages', constraint, retention }, ctx);
  return { spec, options: { route: dialect.route, parseToolCalls: input.tools !== undefined } };
}
