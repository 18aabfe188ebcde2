/**
 * What the reply memory keeps of a finished reply: its texts as the next
 * turn will send them back, each with the exact ids it was sampled as.
 *
 * One definition for both sides that record them: the API process at the
 * end of a generation (src/serve/generation.ts, from its streamed state) and
 * `kvtier worker` before it reports the job done (from the sampled ids
 * alone), so the shared record is written on the worker's connection ahead
 * of its `done` and the API does not wait on a write of its own.
 *
 * Invariant: every reply returned is its text's ids: it decodes exactly to
 * its text (`codec.decode(ids) === text`), but for harmony's call form, the
 * raw reply's ids then the `<|call|>` id for the text's closing `<|call|>`. A
 * text that is not is left out, and the next turn re-encodes it (fewer cached
 * tokens, never other tokens).
 */
import type { RequestSpec } from '../request-spec.ts';
import { HarmonySplitter, promptOpensHarmony } from './harmony.ts';
import { contentIdsOf, promptOpensThinking, ReasoningSplitter } from './reasoning.ts';
import type { PromptCodec } from './types.ts';

/** A reply text and the ids it was sampled as. */
export interface SampledReply {
  text: string;
  ids: number[];
}

/** How a reply is read, decided by the prompt alone. */
export interface ReplyForm {
  /** gpt-oss channels (recipe/harmony.ts) rather than a think block. */
  harmony: boolean;
  /** The think block: opened by the prompt (true), maybe by the reply (false), or not split at all ('off'). */
  thinking: boolean | 'off';
}

/** `splitReasoning` false: the reply is returned raw (/v1/completions). */
export function replyFormOf(codec: Pick<PromptCodec, 'decode'>, spec: Pick<RequestSpec, 'tokens' | 'constraint'>, splitReasoning: boolean): ReplyForm {
  const tail = codec.decode(spec.tokens.slice(-8));
  // A grammar-held reply is plain content from its first token, unless the grammar is harmony's own tool call.
  const harmonyCall = spec.constraint?.kind === 'tool_call' && spec.constraint.format === 'harmony';
  const harmony = splitReasoning && (spec.constraint === undefined || harmonyCall) && promptOpensHarmony(tail);
  return { harmony, thinking: harmony ? false : !splitReasoning ? 'off' : spec.constraint === undefined && promptOpensThinking(tail) };
}

/** The splitter that separates a reply of this form into reasoning and content. */
export function replySplitter(form: ReplyForm): ReasoningSplitter | HarmonySplitter {
  return form.harmony ? new HarmonySplitter() : new ReasoningSplitter(form.thinking);
}

export interface FinishedReply {
  /** The reply's ids without the end-of-generation id that ended it. */
  ids: readonly number[];
  /** The reply as streamed (its detokenized text). */
  rawText: string;
  /** The end-of-generation id that ended the reply, if one did. */
  stopId: number | null;
  /** Its think block, split off (or not) by the form's splitter. */
  thinking: { opened: boolean; content: string };
}

export function sampledReplies(codec: Pick<PromptCodec, 'decode' | 'harmony'>, form: ReplyForm, reply: FinishedReply): SampledReply[] {
  const { ids, rawText, thinking } = reply;
  if (ids.length === 0 || rawText === '' || codec.decode(ids) !== rawText) return [];
  const sampled: SampledReply[] = [{ text: rawText, ids: [...ids] }];
  // The next turn sends back the content alone (templates drop earlier reasoning): its own ids too.
  const contentIds = thinking.opened ? contentIdsOf(codec, thinking.content, ids) : null;
  if (contentIds) sampled.push({ text: thinking.content, ids: contentIds });
  // harmony: a reply that ended on <|call|> comes back as a call message closed by <|call|> (OpenAI's template, gptoss-template.ts)
  const call = codec.harmony?.callTokenId;
  if (form.harmony && call !== undefined && reply.stopId === call) sampled.push({ text: rawText + '<|call|>', ids: [...ids, call] });
  return sampled;
}

/**
 * A worker's side: the replies of a job from its sampled ids alone, read as
 * a chat route reads them (reasoning split). A raw-completion request's
 * replies are a subset of these (its one raw text), so the API may skip its
 * own write whatever the route. Not for a request with stop strings: those
 * cut the text on the API side, which the worker does not see.
 */
export function sampledRepliesOfIds(codec: Pick<PromptCodec, 'decode' | 'harmony' | 'stopTokenIds' | 'createDetokenizer'>, spec: Pick<RequestSpec, 'tokens' | 'constraint'>, completionIds: Iterable<number>): SampledReply[] {
  const stops = new Set(codec.stopTokenIds);
  const ids: number[] = [];
  let stopId: number | null = null;
  const detokenizer = codec.createDetokenizer();
  let rawText = '';
  for (const id of completionIds) {
    if (stops.has(id)) {
      stopId = id;
      continue;
    }
    ids.push(id);
    rawText += detokenizer.push(id);
  }
  rawText += detokenizer.flush();
  const form = replyFormOf(codec, spec, true);
  const splitter = replySplitter(form);
  splitter.push(rawText);
  splitter.finish();
  return sampledReplies(codec, form, { ids, rawText, stopId, thinking: { opened: splitter.opened, content: splitter.content } });
}
