/**
 * Responses API `include` (POST /v1/responses, GET /v1/responses/{id},
 * GET /v1/responses/{id}/input_items): the reference's ResponseIncludable
 * values, and what kvtier does with each.
 *
 *   reasoning.encrypted_content   reasoning output items carry `encrypted_content`, a kvtier token
 *                                 of the reasoning text ("kvtr1." + base64url). It is NOT a secret
 *                                 from the client: kvtier already returns the reasoning in clear
 *                                 (`content`), so there is nothing to hide; the token exists so a
 *                                 stateless client (store: false) that round-trips reasoning items by
 *                                 their encrypted_content keeps the reasoning its template re-renders.
 *   message.output_text.logprobs  400: the engine reports sampled ids, not log-probabilities
 *   the tool-output values        accepted, nothing to add: only function tools run here, so there
 *   (file_search_call.results, …) is never a file-search / web-search / computer / code-interpreter
 *                                 item, nor an input image
 *   anything else                 400 naming `include`
 */
import { KvtError } from '../errors.ts';

export const REASONING_TOKEN = 'reasoning.encrypted_content';
export const OUTPUT_LOGPROBS = 'message.output_text.logprobs';

/** Values that name items this server never produces or accepts: valid, and include nothing. */
const NOTHING_TO_ADD = [
  'file_search_call.results',
  'web_search_call.results',
  'web_search_call.action.sources',
  'message.input_image.image_url',
  'computer_call_output.output.image_url',
  'code_interpreter_call.outputs',
];

export interface ResponsesInclude {
  /** Reasoning output items carry `encrypted_content`. */
  reasoningToken: boolean;
}

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** The request's `include` (a list of strings, or absent) → what to add. */
export function parseInclude(include: unknown): ResponsesInclude {
  if (include === undefined || include === null) return { reasoningToken: false };
  const values = typeof include === 'string' ? [include] : include;
  if (!Array.isArray(values)) throw invalid('include must be a list of strings', 'include');
  let reasoningToken = false;
  values.forEach((value: unknown, index) => {
    if (value === REASONING_TOKEN) reasoningToken = true;
    else if (value === OUTPUT_LOGPROBS) {
      throw invalid(`include[${index}] "${OUTPUT_LOGPROBS}" cannot be honoured: kvtier's sampler reports the sampled token ids, not their log-probabilities; drop it from include`, 'include');
    } else if (typeof value !== 'string' || !NOTHING_TO_ADD.includes(value)) {
      throw invalid(`include[${index}] ${JSON.stringify(value)} is not one of ${[REASONING_TOKEN, OUTPUT_LOGPROBS, ...NOTHING_TO_ADD].join(', ')}`, 'include');
    }
  });
  return { reasoningToken };
}

const TOKEN_PREFIX = 'kvtr1.';

/** The reasoning text as the opaque `encrypted_content` of a reasoning item. */
export function reasoningToken(text: string): string {
  return TOKEN_PREFIX + Buffer.from(text, 'utf8').toString('base64url');
}

/** A reasoning item's `encrypted_content` sent back → its reasoning text (a 400 naming `param` when kvtier did not issue it). */
export function reasoningFromToken(token: string, param: string): string {
  if (!token.startsWith(TOKEN_PREFIX) || !/^[A-Za-z0-9_-]*$/.test(token.slice(TOKEN_PREFIX.length))) {
    throw invalid(`${param} is not a reasoning token this server issued (they start with "${TOKEN_PREFIX}"); send the reasoning item's content instead`, param);
  }
  return Buffer.from(token.slice(TOKEN_PREFIX.length), 'base64url').toString('utf8');
}
