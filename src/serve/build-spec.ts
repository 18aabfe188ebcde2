/**
 * Where a request's RequestSpec (src/request-spec.ts) is built, once per
 * request: what the route parsed, plus the id, model, tenant namespace and
 * the time it was accepted. The request's limits are checked here and only
 * here (the prompt is not empty, prompt + max_tokens fit the context, a
 * constraint fits max_tokens); below this the scheduler asserts them.
 */
import { randomUUID } from 'node:crypto';

import { KvtError } from '../errors.ts';
import { checkConstraintBudget, type ConstraintSpec } from '../recipe/index.ts';
import type { CacheRetentionHint, RequestSpec, SamplingSpec } from '../request-spec.ts';
import type { TenantIdentity } from './auth.ts';

export interface SpecParts {
  tokens: Uint32Array;
  sampling: SamplingSpec;
  identity: TenantIdentity;
  trafficClass: string;
  constraint?: ConstraintSpec;
  retention?: CacheRetentionHint;
  /** Request field that holds the prompt, for error messages. */
  promptParam: string;
}

/** Throws the 4xx of a request that cannot run (before anything is queued). */
export function buildSpec(parts: SpecParts, served: { modelId: string; contextLength: number }): RequestSpec {
  const { tokens, sampling, promptParam } = parts;
  const { contextLength } = served;
  if (tokens.length === 0) throw new KvtError('KVT_ERR_REQUEST_EMPTY_PROMPT', `${promptParam} renders to no tokens`, { param: promptParam });
  if (tokens.length >= contextLength) {
    throw new KvtError('KVT_ERR_REQUEST_CONTEXT_OVERFLOW', `${promptParam} is ${tokens.length} tokens; the context length is ${contextLength}`, { param: promptParam });
  }
  if (tokens.length + sampling.maxTokens > contextLength) {
    throw new KvtError(
      'KVT_ERR_REQUEST_MAX_TOKENS',
      `max_tokens ${sampling.maxTokens} + prompt ${tokens.length} tokens exceeds the context length ${contextLength}; use max_tokens ≤ ${contextLength - tokens.length}`,
      { param: 'max_tokens' },
    );
  }
  checkConstraintBudget(parts.constraint, sampling.maxTokens);
  return {
    id: randomUUID(),
    model: served.modelId,
    tenant: parts.identity.tenant,
    tenantSalt: parts.identity.saltHex,
    trafficClass: parts.trafficClass,
    tokens,
    sampling,
    submittedAt: Date.now(),
    ...(parts.constraint ? { constraint: parts.constraint } : {}),
    ...(parts.retention ? { retention: parts.retention } : {}),
  };
}
