/**
 * Text a JSON body may carry. RFC 8259 JSON is UTF-8, and a string is a
 * sequence of Unicode scalar values:
 *
 *   - bytes that are not UTF-8 (0xFF, a truncated sequence) → 400 KVT_ERR_REQUEST_BAD_JSON
 *     naming the byte offset (a lenient decoder would turn them into U+FFFD and
 *     the model would read text the client never sent);
 *   - a lone surrogate escape ("\ud800") → 400 KVT_ERR_REQUEST_INVALID naming the field
 *     (it has no UTF-8 form, so the tokenizer would see a replacement character).
 *
 * NUL and other control characters are valid JSON string content and pass.
 */
import type { FastifyInstance, FastifyRequest } from 'fastify';

import { KvtError } from '../errors.ts';

const utf8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/** The first byte offset of `bytes` where UTF-8 decoding fails (a plain scan, run only after the fast decoder refused). */
function firstBadUtf8Offset(bytes: Buffer): number {
  let i = 0;
  while (i < bytes.length) {
    const b = bytes[i];
    const need = b < 0x80 ? 0 : b >= 0xc2 && b <= 0xdf ? 1 : b >= 0xe0 && b <= 0xef ? 2 : b >= 0xf0 && b <= 0xf4 ? 3 : -1;
    if (need < 0) return i;
    if (need > 0) {
      if (i + need >= bytes.length) return i;
      try {
        utf8.decode(bytes.subarray(i, i + need + 1));
      } catch {
        return i;
      }
    }
    i += need + 1;
  }
  return bytes.length;
}

/** Replaces Fastify's application/json parser by one that refuses bytes that are not UTF-8, then parses as before (prototype-poisoning checks included). */
export function useStrictUtf8Json(app: FastifyInstance): void {
  const parseJson = app.getDefaultJsonParser('error', 'error');
  app.removeContentTypeParser('application/json');
  app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (request: FastifyRequest, body: Buffer, done) => {
    let text: string;
    try {
      text = utf8.decode(body);
    } catch {
      const at = firstBadUtf8Offset(body);
      const error = new KvtError('KVT_ERR_REQUEST_BAD_JSON', `the body is not valid UTF-8 (byte ${at} of ${body.length}); JSON must be sent as UTF-8`, { param: 'body' });
      done(error, undefined);
      return;
    }
    parseJson(request, text, done);
  });
}

interface Visit {
  value: unknown;
  key: string;
  parent: Visit | null;
}

/** Values a walk visits between two yields to the event loop (as request-limits.ts's depth walk). */
const yieldToLoop = (): Promise<void> => new Promise((resolve) => setImmediate(resolve));
const VISITS_PER_SLICE = 20_000;

const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * Throws KVT_ERR_REQUEST_INVALID naming the first string (value or key) of
 * `body` that holds a lone surrogate. Iterative, in slices (the body's depth
 * and size are the client's).
 */
export async function checkWellFormedStrings(body: unknown): Promise<void> {
  if (typeof body === 'string') {
    if (!isWellFormed(body)) throw loneSurrogate({ value: body, key: '', parent: null });
    return;
  }
  if (body === null || typeof body !== 'object') return;
  // Only objects and arrays are stacked; strings are checked where they are met (a Visit per string cost 3x the walk).
  const stack: Visit[] = [{ value: body, key: '', parent: null }];
  let visits = 0;
  while (stack.length > 0) {
    const visit = stack.pop()!;
    const item = visit.value as object;
    if (Array.isArray(item)) {
      visits += item.length;
      for (let i = item.length - 1; i >= 0; i--) {
        const child: unknown = item[i];
        if (typeof child === 'string') {
          if (!isWellFormed(child)) throw loneSurrogate({ value: child, key: `[${i}]`, parent: visit });
        } else if (child !== null && typeof child === 'object') stack.push({ value: child, key: `[${i}]`, parent: visit });
      }
    } else {
      const keys = Object.keys(item);
      visits += keys.length;
      for (const key of keys) {
        if (!isWellFormed(key)) throw loneSurrogate({ value: key, key: '', parent: visit }, true);
        const child = (item as Record<string, unknown>)[key];
        if (typeof child === 'string') {
          if (!isWellFormed(child)) throw loneSurrogate({ value: child, key: `.${key}`, parent: visit });
        } else if (child !== null && typeof child === 'object') stack.push({ value: child, key: `.${key}`, parent: visit });
      }
    }
    if (visits >= VISITS_PER_SLICE) {
      visits = 0;
      await yieldToLoop();
    }
  }
}

function loneSurrogate(visit: Visit, inKey = false): KvtError {
  const keys: string[] = [];
  for (let at: Visit | null = visit; at !== null; at = at.parent) keys.push(at.key);
  const path = keys.reverse().join('').replace(/^\./, '') || 'body';
  // The path itself may hold the surrogate (a key): show it escaped.
  const param = path.replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
  return new KvtError('KVT_ERR_REQUEST_INVALID', `${param}${inKey ? ' has a key that' : ''} holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff escape), which is not text: send the character's full surrogate pair, or UTF-8`, { param });
}
