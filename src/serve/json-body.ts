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

export const isWellFormed = (text: string): boolean => (text as string & { isWellFormed(): boolean }).isWellFormed();

/**
 * KVT_ERR_REQUEST_INVALID naming the string (value, or with `inKey` a key of
 * the object at `path`) that holds a lone surrogate. The preflight's body walk
 * (request-limits.ts) finds it.
 */
export function loneSurrogateError(path: string, inKey: boolean): KvtError {
  // The path itself may hold the surrogate (a key): show it escaped.
  const param = (path || 'body').replace(/[\ud800-\udfff]/g, (c) => `\\u${c.charCodeAt(0).toString(16)}`);
  return new KvtError('KVT_ERR_REQUEST_INVALID', `${param}${inKey ? ' has a key that' : ''} holds a lone UTF-16 surrogate (an unpaired \\ud800–\\udfff escape), which is not text: send the character's full surrogate pair, or UTF-8`, { param });
}
