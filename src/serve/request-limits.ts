/**
 * What a generation request is checked for before any heavy work, in this
 * order (a Fastify preValidation hook of the generate routes, so it runs after
 * the body is parsed and before the JSON schema walks it):
 *
 *   1. the API key (401 whatever the body; already checked by the app's
 *      onRequest hook authenticateApiRoutes before the body was read)
 *   2. the message count          ≤ KVTIER_MAX_MESSAGES   (400, param `messages`)
 *   3. JSON nesting depth          ≤ KVTIER_MAX_JSON_DEPTH (400, param = the path)
 *   4. no lone surrogate in any string (400, param = the path; found by the same walk as 3)
 *
 * Body bytes (KVTIER_MAX_BODY_BYTES, 413) are Fastify's bodyLimit, checked
 * while the body streams in; the prompt length against the context is checked
 * from the rendered text's length before tokenizing (recipe checkPromptLength).
 */
import type { FastifyRequest } from 'fastify';

import { KvtError } from '../errors.ts';
import type { ChatMessage } from '../recipe/index.ts';
import type { TenantIdentity } from './auth.ts';
import type { ServeContext } from './context.ts';
import { isWellFormed, loneSurrogateError } from './json-body.ts';

/**
 * Tool-call arguments arrive as JSON strings, so the body's depth check cannot
 * see into them; templates walk them recursively once parsed. Each parsed
 * object is checked at its depth in the transcript
 * (messages → message → tool_calls → call → function → arguments).
 */
export async function checkToolCallArguments(messages: readonly ChatMessage[], limit: number): Promise<void> {
  const ARGUMENTS_DEPTH = 5;
  for (let m = 0; m < messages.length; m++) {
    const calls = messages[m].tool_calls ?? [];
    for (let c = 0; c < calls.length; c++) {
      const args = calls[c].function.arguments;
      if (typeof args === 'object' && args !== null) await checkJsonDepth(args, limit, `messages[${m}].tool_calls[${c}].function.arguments`, ARGUMENTS_DEPTH);
    }
  }
}

/** The tenant each request's preflight identified, so the handler does not derive its salt again. */
const identities = new WeakMap<FastifyRequest, TenantIdentity>();

/** The identity the preflight found for `request`, else (a route without the preflight) from its headers. */
export function requestIdentity(ctx: ServeContext, request: FastifyRequest): TenantIdentity {
  return identities.get(request) ?? ctx.auth.identify(request.headers);
}

/**
 * The onRequest hook of the app: every /v1/* route is authenticated as soon as
 * the router picked it, before its body is read, so a request without a valid
 * key gets 401 whatever its body (malformed, oversized, of another media type).
 */
export function authenticateApiRoutes(ctx: ServeContext): (request: FastifyRequest) => Promise<void> {
  return async (request) => {
    const route = request.routeOptions.url;
    if (route !== undefined && route.startsWith('/v1/')) identities.set(request, ctx.auth.identify(request.headers));
  };
}

export function generatePreflight(ctx: ServeContext): (request: FastifyRequest) => Promise<void> {
  const { maxMessages, maxJsonDepth } = ctx.config;
  return async (request) => {
    if (!identities.has(request)) identities.set(request, ctx.auth.identify(request.headers));
    const body = request.body as { messages?: unknown; input?: unknown } | null | undefined;
    // Chat routes send `messages`; /v1/responses sends `input` items.
    const field = body !== null && typeof body === 'object' && body.messages === undefined && Array.isArray(body.input) ? 'input' : 'messages';
    const messages = body !== null && typeof body === 'object' ? body[field] : undefined;
    if (Array.isArray(messages) && messages.length > maxMessages) {
      throw new KvtError('KVT_ERR_REQUEST_TOO_MANY_MESSAGES', `${field} holds ${messages.length} messages; this server takes at most ${maxMessages} (KVTIER_MAX_MESSAGES)`, { param: field });
    }
    await checkBodyShape(body, maxJsonDepth);
  };
}

/** Values a walk visits between two yields to the event loop (~1 ms of work). */
const VISITS_PER_SLICE = 20_000;

/** Lets timers and I/O run between slices of request-sized work. */
export function yieldToLoop(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Throws KVT_ERR_REQUEST_TOO_DEEP naming the first value nested deeper than
 * `limit` below `value` (at `path`, itself `startDepth` levels down in the
 * request). Iterative, in slices.
 */
export async function checkJsonDepth(value: unknown, limit: number, path: string, startDepth = 0): Promise<void> {
  const fault = await firstBodyFault(value, limit, startDepth, false);
  if (fault?.kind === 'deep') throw tooDeep(joinPath(path, fault.path), limit);
}

/**
 * The preflight's one walk over the body: nesting deeper than `limit`
 * (KVT_ERR_REQUEST_TOO_DEEP, which wins wherever it is), else the first string
 * or key holding a lone surrogate (KVT_ERR_REQUEST_INVALID, json-body.ts).
 */
async function checkBodyShape(body: unknown, limit: number): Promise<void> {
  if (typeof body === 'string') {
    if (!isWellFormed(body)) throw loneSurrogateError('', false);
    return;
  }
  const fault = await firstBodyFault(body, limit, 0, true);
  if (fault?.kind === 'deep') throw tooDeep(fault.path, limit);
  if (fault?.kind === 'surrogate') throw loneSurrogateError(fault.path, fault.inKey);
}

function tooDeep(param: string, limit: number): KvtError {
  return new KvtError('KVT_ERR_REQUEST_TOO_DEEP', `${param || 'body'} is nested more than ${limit} levels deep (KVTIER_MAX_JSON_DEPTH)`, { param: param || 'body' });
}

interface Visit {
  value: unknown;
  depth: number;
  key: string;
  parent: Visit | null;
}

type BodyFault = { kind: 'deep'; path: string } | { kind: 'surrogate'; path: string; inKey: boolean };

/**
 * Depth first over objects and arrays only (a string is checked where it is
 * met). The first object or array deeper than `limit` ends the walk; the first
 * lone surrogate (when `strings`) is kept and reported only if nothing is too deep.
 */
async function firstBodyFault(value: unknown, limit: number, startDepth: number, strings: boolean): Promise<BodyFault | null> {
  if (value === null || typeof value !== 'object') return null;
  const stack: Visit[] = [{ value, depth: startDepth, key: '', parent: null }];
  let surrogate: BodyFault | null = null;
  let visits = 0;
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const item = visit.value as object;
    const depth = visit.depth + 1;
    if (depth > limit) return { kind: 'deep', path: pathOf(visit) };
    const noteString = (text: string, key: string, inKey: boolean) => {
      if (strings && surrogate === null && !isWellFormed(text)) surrogate = { kind: 'surrogate', path: pathOf({ value: text, depth, key, parent: visit }), inKey };
    };
    if (Array.isArray(item)) {
      visits += item.length;
      for (let i = item.length - 1; i >= 0; i--) {
        const child: unknown = item[i];
        if (typeof child === 'string') noteString(child, `[${i}]`, false);
        else if (child !== null && typeof child === 'object') stack.push({ value: child, depth, key: `[${i}]`, parent: visit });
      }
    } else {
      const keys = Object.keys(item);
      visits += keys.length;
      for (const key of keys) {
        noteString(key, '', true);
        const child = (item as Record<string, unknown>)[key];
        if (typeof child === 'string') noteString(child, `.${key}`, false);
        else if (child !== null && typeof child === 'object') stack.push({ value: child, depth, key: `.${key}`, parent: visit });
      }
    }
    if (visits >= VISITS_PER_SLICE) {
      visits = 0;
      await yieldToLoop();
    }
  }
  return surrogate;
}

function pathOf(visit: Visit): string {
  const keys: string[] = [];
  for (let at: Visit | null = visit; at !== null; at = at.parent) keys.push(at.key);
  return keys.reverse().join('').replace(/^\./, '');
}

function joinPath(base: string, rest: string): string {
  if (base === '') return rest;
  if (rest === '') return base;
  return rest.startsWith('[') ? `${base}${rest}` : `${base}.${rest}`;
}
