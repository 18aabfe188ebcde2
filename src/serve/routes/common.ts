import type { FastifyReply, FastifyRequest } from 'fastify';

import { KvtError } from '../../errors.ts';
import { retentionFromAnthropic, retentionFromOpenAi, retentionOrUndefined, type CacheRetentionHint } from '../../recipe/index.ts';
import { resolveTrafficClass, type TenantIdentity } from '../auth.ts';
import type { ServeContext } from '../context.ts';
import { requestIdentity } from '../request-limits.ts';

export function checkModel(ctx: ServeContext, model: string): void {
  if (model !== ctx.modelId) {
    throw new KvtError('KVT_ERR_REQUEST_UNKNOWN_MODEL', `model "${model}" is not served here; this server serves "${ctx.modelId}"`, { param: 'model' });
  }
}

/** logit_bias keys are token ids of this model's vocabulary (the schema checked their form and the values' range). */
export function checkLogitBias(ctx: ServeContext, bias: Record<string, number> | null | undefined): void {
  if (bias === null || bias === undefined) return;
  for (const key of Object.keys(bias)) {
    if (Number(key) >= ctx.vocabSize) throw new KvtError('KVT_ERR_REQUEST_INVALID', `logit_bias key ${key} is not a token id of this model: ids run from 0 to ${ctx.vocabSize - 1}`, { param: `logit_bias.${key}` });
  }
}

export interface RequestPreamble {
  identity: TenantIdentity;
  trafficClass: string;
}

export function preamble(ctx: ServeContext, request: FastifyRequest, body: { model: string; kvtier_class?: string }, agentic: boolean): RequestPreamble {
  const identity = requestIdentity(ctx, request);
  checkModel(ctx, body.model);
  const trafficClass = resolveTrafficClass(request.headers['x-kvtier-class'], body.kvtier_class, agentic, ctx.policy.knownClasses());
  return { identity, trafficClass };
}

/** The client's retention hint of an OpenAI body (+ the x-kvtier-cache header); undefined when it asked for nothing. */
export function openAiRetention(request: FastifyRequest, body: object): CacheRetentionHint | undefined {
  return retentionOrUndefined(retentionFromOpenAi(body, request.headers['x-kvtier-cache']));
}

/** The client's retention hint of an Anthropic body (cache_control markers + the x-kvtier-cache header). */
export function anthropicRetention(request: FastifyRequest, body: object): CacheRetentionHint | undefined {
  return retentionOrUndefined(retentionFromAnthropic(body, request.headers['x-kvtier-cache']));
}

let counter = 0;
/** Response ids: prefix + time + counter, unique within a process and sortable. */
export function responseId(prefix: string): string {
  counter = (counter + 1) % 1_000_000;
  return `${prefix}${Date.now().toString(36)}${counter.toString(36).padStart(4, '0')}${Math.random().toString(36).slice(2, 8)}`;
}

/** Non-streamed replies say where the time went: the worker's own time (lookup, load, prefill, decode) and the queue wait. */
export function setTimingHeaders(reply: FastifyReply, end: { workerMs: number; queueMs: number }): void {
  void reply.header('x-kvtier-worker-ms', end.workerMs.toFixed(3));
  void reply.header('x-kvtier-queue-ms', end.queueMs.toFixed(3));
}
