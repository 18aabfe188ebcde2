/**
 * Errors → HTTP. OpenAI routes answer `{error: {message, type, param, code}}`;
 * /v1/messages answers Anthropic's `{type: 'error', error: {type, message}}`
 * (with our `code` and `param` beside). Fastify's own faults (malformed
 * JSON, schema validation, body too large) are mapped to our codes first.
 */
import type { FastifyError, FastifyReply, FastifyRequest } from 'fastify';

import { describeError, type DescribedError } from '../errors.ts';

export function isAnthropicRoute(url: string): boolean {
  return url.startsWith('/v1/messages');
}

/** Fastify validation / parser errors → our described error. */
export function describeHttpError(error: unknown): DescribedError {
  const fastifyError = error as FastifyError & { validation?: Array<{ instancePath: string; message?: string; params?: Record<string, unknown>; keyword: string; propertyName?: string }> };
  if (fastifyError?.validation && fastifyError.validation.length > 0) {
    const first = fastifyError.validation[0];
    const path = toParam(first.instancePath, first.params);
    // A propertyNames failure (logit_bias keys): say which key.
    const key = typeof first.propertyName === 'string' ? ` key "${first.propertyName.slice(0, 64)}"` : '';
    const described = describeError({ code: 'KVT_ERR_REQUEST_INVALID', message: `${path || 'body'}${key} ${first.message ?? 'is invalid'}` });
    return { ...described, param: path || null };
  }
  switch (fastifyError?.code) {
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
      return describeError({ code: 'KVT_ERR_REQUEST_BAD_JSON', message: `the body is not valid JSON: ${fastifyError.message}` });
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return describeError({ code: 'KVT_ERR_REQUEST_TOO_LARGE', message: fastifyError.message });
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return describeError({ code: 'KVT_ERR_REQUEST_UNSUPPORTED_MEDIA', message: fastifyError.message });
    default:
      break;
  }
  if (error instanceof SyntaxError && (fastifyError as { statusCode?: number }).statusCode === 400) {
    return describeError({ code: 'KVT_ERR_REQUEST_BAD_JSON', message: `the body is not valid JSON: ${error.message}` });
  }
  return describeError(error);
}

/** `/messages/0/role` → `messages[0].role`; a missing required property names the property. */
function toParam(instancePath: string, params: Record<string, unknown> | undefined): string {
  let path = instancePath
    .split('/')
    .filter((p) => p !== '')
    .map((p) => (/^\d+$/.test(p) ? `[${p}]` : `.${p}`))
    .join('')
    .replace(/^\./, '');
  const missing = params?.missingProperty;
  if (typeof missing === 'string') path = path ? `${path}.${missing}` : missing;
  return path;
}

export function errorBody(described: DescribedError, anthropic: boolean): Record<string, unknown> {
  if (anthropic) {
    return { type: 'error', error: { type: described.type, message: described.message, code: described.code, param: described.param, hint: described.hint } };
  }
  return { error: { message: described.message, type: described.type, param: described.param, code: described.code, hint: described.hint } };
}

export function sendError(request: FastifyRequest, reply: FastifyReply, error: unknown): FastifyReply {
  const described = describeHttpError(error);
  if (described.status >= 500) request.log.error({ err: error, code: described.code }, described.message);
  else request.log.info({ code: described.code, param: described.param }, described.message);
  if (described.retryAfterS !== undefined && (described.status === 409 || described.status === 429 || described.status === 503 || described.status === 504)) {
    void reply.header('retry-after', String(described.retryAfterS));
  }
  // The matched route, not the raw URL: /v1/%6Dessages is the messages route too.
  return reply.status(described.status).send(errorBody(described, isAnthropicRoute(request.routeOptions?.url ?? request.url)));
}
