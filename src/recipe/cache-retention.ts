/**
 * Retention a client asks for, read from the request (never trusted as is:
 * KvTier.store caps `ttlMs` by the operator's policy, `clientTtlMaxMs`).
 *
 *   OpenAI     prompt_cache_retention  "in_memory" → 10 min, "24h" → 24 h
 *              prompt_cache_key        accepted (≤ 1024 chars); kvtier's prefix hash already keys the cache
 *   Anthropic  cache_control {type: "ephemeral", ttl?: "5m" | "1h"} on system / message / tool blocks
 *              → the longest ttl marked (default "5m"), for the whole request's blocks
 *   any route  header `x-kvtier-cache: no-store` or body `kvtier_cache: "no-store"` → store nothing
 *
 * A bad value is a 400 (KVT_ERR_REQUEST_INVALID) naming the field.
 */
import { KvtError } from '../errors.ts';

export type { CacheRetentionHint } from '../request-spec.ts';
import type { CacheRetentionHint } from '../request-spec.ts';

const MINUTE_MS = 60_000;
const HOUR_MS = 60 * MINUTE_MS;

/** OpenAI: "in_memory" is the short retention of its hot tier (5-10 min of inactivity), "24h" the extended one. */
export const OPENAI_RETENTION_MS: Readonly<Record<string, number>> = { in_memory: 10 * MINUTE_MS, '24h': 24 * HOUR_MS };
/** Anthropic cache_control ttl values. */
export const ANTHROPIC_TTL_MS: Readonly<Record<string, number>> = { '5m': 5 * MINUTE_MS, '1h': HOUR_MS };

const CACHE_MODES = ['store', 'no-store'] as const;
const MAX_CACHE_KEY = 1024;

function invalid(param: string, message: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** `x-kvtier-cache` header and `kvtier_cache` field: "store" (default) or "no-store". */
export function noStoreFrom(header: string | string[] | undefined, field: unknown): boolean {
  let noStore = false;
  if (header !== undefined) {
    const value = (Array.isArray(header) ? header.join(',') : header).trim().toLowerCase();
    if (!(CACHE_MODES as readonly string[]).includes(value)) throw invalid('x-kvtier-cache', `header x-kvtier-cache is ${JSON.stringify(value)}; use "no-store" (store none of this request's blocks) or "store"`);
    noStore = value === 'no-store';
  }
  if (field !== undefined && field !== null) {
    if (typeof field !== 'string' || !(CACHE_MODES as readonly string[]).includes(field)) throw invalid('kvtier_cache', `kvtier_cache is ${JSON.stringify(field)}; use "no-store" or "store"`);
    noStore ||= field === 'no-store';
  }
  return noStore;
}

export interface OpenAiRetentionFields {
  prompt_cache_key?: unknown;
  prompt_cache_retention?: unknown;
  kvtier_cache?: unknown;
}

/** OpenAI chat / completions / responses bodies. */
export function retentionFromOpenAi(request: object, header?: string | string[]): CacheRetentionHint {
  const body = request as OpenAiRetentionFields;
  const hint: CacheRetentionHint = {};
  const key = body.prompt_cache_key;
  if (key !== undefined && key !== null && (typeof key !== 'string' || key.length > MAX_CACHE_KEY)) {
    throw invalid('prompt_cache_key', `prompt_cache_key must be a string of at most ${MAX_CACHE_KEY} characters`);
  }
  const retention = body.prompt_cache_retention;
  if (retention !== undefined && retention !== null) {
    if (typeof retention !== 'string' || !Object.hasOwn(OPENAI_RETENTION_MS, retention)) {
      throw invalid('prompt_cache_retention', `prompt_cache_retention is ${JSON.stringify(retention)}; use "in_memory" or "24h"`);
    }
    hint.ttlMs = OPENAI_RETENTION_MS[retention];
  }
  if (noStoreFrom(header, body.kvtier_cache)) hint.noStore = true;
  return hint;
}

export interface AnthropicRetentionFields {
  system?: unknown;
  messages?: unknown;
  tools?: unknown;
  kvtier_cache?: unknown;
}

/** Anthropic messages: every cache_control marker, checked and named by its place. */
export function retentionFromAnthropic(request: object, header?: string | string[]): CacheRetentionHint {
  const body = request as AnthropicRetentionFields;
  let longest: number | undefined;
  const visit = (block: unknown, at: string) => {
    if (typeof block !== 'object' || block === null || !('cache_control' in block)) return;
    const control = (block as { cache_control: unknown }).cache_control;
    if (control === null || control === undefined) return;
    const where = `${at}.cache_control`;
    if (typeof control !== 'object' || (control as { type?: unknown }).type !== 'ephemeral') throw invalid(`${where}.type`, `${where}.type must be "ephemeral"`);
    const ttl = (control as { ttl?: unknown }).ttl ?? '5m';
    if (typeof ttl !== 'string' || !Object.hasOwn(ANTHROPIC_TTL_MS, ttl)) throw invalid(`${where}.ttl`, `${where}.ttl is ${JSON.stringify(ttl)}; use "5m" or "1h"`);
    longest = Math.max(longest ?? 0, ANTHROPIC_TTL_MS[ttl]);
  };
  if (Array.isArray(body.system)) body.system.forEach((block, i) => visit(block, `system[${i}]`));
  if (Array.isArray(body.tools)) body.tools.forEach((tool, i) => visit(tool, `tools[${i}]`));
  if (Array.isArray(body.messages)) {
    body.messages.forEach((message, m) => {
      const content = (message as { content?: unknown })?.content;
      if (!Array.isArray(content)) return;
      content.forEach((block, b) => {
        visit(block, `messages[${m}].content[${b}]`);
        const inner = (block as { content?: unknown })?.content;
        if (Array.isArray(inner)) inner.forEach((part, p) => visit(part, `messages[${m}].content[${b}].content[${p}]`));
      });
    });
  }
  const hint: CacheRetentionHint = {};
  if (longest !== undefined) hint.ttlMs = longest;
  if (noStoreFrom(header, body.kvtier_cache)) hint.noStore = true;
  return hint;
}

/** The hint a job carries, or undefined when the request asked for nothing (the class TTL applies). */
export function retentionOrUndefined(hint: CacheRetentionHint): CacheRetentionHint | undefined {
  return hint.ttlMs === undefined && !hint.noStore ? undefined : hint;
}
