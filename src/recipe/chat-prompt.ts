/**
 * Chat transcript → prompt tokens, prefix-stable, in time linear in the
 * transcript.
 *
 * The cache only helps if turn n+1's prompt begins with exactly the tokens of
 * turn n's prompt and reply. Tokenizing the whole rendered transcript at once
 * does not guarantee that (a merge can straddle a message boundary, and a
 * re-encoded reply need not equal the sampled ids). So the transcript is
 * tokenized segment by segment:
 *
 *   render(m[0..i]) = render(m[0..i-1]) + segment_i
 *   tokens          = enc(segment_0) ‖ enc(segment_1) ‖ … ‖ enc(generation prompt)
 *
 * and an assistant segment is split as
 *
 *   segment = generation prompt ‖ reply body ‖ end of turn
 *
 * with the reply body's ids taken from the ReplyMemory (the ids the model
 * sampled) when this server generated it. Then, for a reply R to prompt P:
 *
 *   prompt(m + [R] + more) starts with P ‖ ids(R) ‖ enc(end of turn)
 *
 * The segments come from ONE render that marks where each message's loop
 * iteration begins (inference-core chat-template-segments.ts), not from
 * rendering every prefix (O(n²); chat-prompt-reference.ts is that definition,
 * kept as the tests' reference twin). For a template whose output for m[0..i]
 * does not change once later messages exist, the two agree token for token.
 * Up to two more renders (of the transcript before its last message and
 * before its last user message) check that at the boundaries a follow-up
 * turn reuses; `prefixStable` reports it. Templates that cannot be segmented
 * are encoded whole (correct text, fewer hits). A template that adds text
 * between messages depending on what follows (`{% if not loop.last %}`) gets
 * that text at the end of the earlier message's segment, where rendering
 * every prefix would put it at the start of the next: same text, and a
 * follow-up turn may reuse less of the cache.
 *
 * Two steps, so the heavy one can run off the event loop:
 *   draftChatPrompt   (pure: codec + transcript → ids, reply spans marked)   any thread
 *   finishChatPrompt  (reply spans → remembered ids, per tenant)              the API thread
 *
 * Ids are built in a TokenIds (a growable Uint32Array) and leave as a
 * Uint32Array, the type the job carries to the engine.
 */
import { TokenIds } from '../../inference-core/index.ts';

import { KvtError } from '../errors.ts';
import type { ReplyMemory } from './reply-memory.ts';
import type { ChatMessage, PromptCodec, ToolSpec } from './types.ts';

export interface ChatPrompt {
  /** Typed here, once: the job carries these ids as they are to the engine (src/scheduler/job.ts). */
  tokens: Uint32Array;
  /** Where each message's tokens start (index into `tokens`), for diagnostics and tests. */
  messageStarts: number[];
  /** false when the template was not prefix-stable for this transcript (fallback used). */
  prefixStable: boolean;
}

/** A prompt before the reply memory is asked: reply bodies are encoded from their text, and their spans are marked. */
export interface ChatPromptDraft extends ChatPrompt {
  /** Spans of `tokens` holding an assistant reply body, in order, with the body text (the memory's key). */
  replies: Array<{ at: number; length: number; text: string }>;
}

/** Sentinel reply used to learn the template's end-of-turn text after an assistant message. */
const PROBE = '\u0001kvtier-probe\u0001';
const endOfTurnByCodec = new WeakMap<PromptCodec, string | null>();

/**
 * A prompt must leave room in the context. A rendered text of c characters is
 * at least ceil(c / maxTokenChars) tokens, so a text that cannot fit is
 * refused from its length alone, before the tokenizer (the heavy part) runs.
 */
export interface PromptLimits {
  contextLength: number;
  /** The request field the prompt came from, for the error. */
  param: string;
}

export function checkPromptLength(codec: PromptCodec, text: string, limits: PromptLimits | undefined): void {
  if (!limits) return;
  const atLeast = Math.ceil(text.length / codec.maxTokenChars);
  if (atLeast >= limits.contextLength) {
    throw new KvtError(
      'KVT_ERR_REQUEST_CONTEXT_OVERFLOW',
      `${limits.param} renders to ${text.length} characters, at least ${atLeast} tokens with this vocabulary (a token is at most ${codec.maxTokenChars} characters); the context length is ${limits.contextLength} tokens`,
      { param: limits.param },
    );
  }
}

export function draftChatPrompt(
  codec: PromptCodec,
  messages: readonly ChatMessage[],
  tools: readonly ToolSpec[] | undefined,
  limits?: PromptLimits,
  templateKwargs?: Readonly<Record<string, unknown>>,
): ChatPromptDraft {
  const options = { ...(tools && tools.length > 0 ? { tools } : {}), ...(templateKwargs && Object.keys(templateKwargs).length > 0 ? { templateKwargs } : {}) };
  const full = codec.renderChat(messages, { ...options, addGenerationPrompt: true });
  checkPromptLength(codec, full, limits);
  const segmented = messages.length > 0 ? codec.renderChatSegmented(messages, { ...options, addGenerationPrompt: false }) : null;
  if (segmented === null || !full.startsWith(segmented.text)) return wholeDraft(codec, full);
  const { text, starts } = segmented;
  const generationPrompt = full.slice(text.length);

  const ids = new TokenIds(Math.max(64, Math.ceil(full.length / 3)));
  const draft: ChatPromptDraft = { tokens: ids.view, messageStarts: [], prefixStable: true, replies: [] };
  // The empty render (BOS text, a tools block) is its own first segment, unless the first message changes it.
  // An empty one adds nothing: a lone BOS here would double the BOS text of a template that prints it with its first message (Llama 3).
  const empty = codec.renderChat([], { ...options, addGenerationPrompt: false });
  let begin = 0;
  if (text.startsWith(empty)) {
    if (empty !== '') ids.append(encodeWithBos(codec, empty));
    begin = empty.length;
  }
  // segment_i = text[begin_i, begin_{i+1}): a message the transcript loop skipped (a system message the
  // template hoists into its header) has an empty segment, its text belonging to the one before.
  const ends = new Array<number>(messages.length);
  let next = text.length;
  for (let i = messages.length - 1; i >= 0; i--) {
    ends[i] = next;
    if (starts[i] !== -1) next = starts[i];
  }
  const endOfTurn = learnEndOfTurn(codec);
  for (let i = 0; i < messages.length; i++) {
    const end = Math.max(begin, ends[i]);
    const segment = text.slice(begin, end);
    draft.messageStarts.push(ids.length);
    if (messages[i].role === 'assistant') pushAssistantSegment(codec, ids, draft.replies, segment, generationPrompt, endOfTurn, messages[i].content);
    else pushText(codec, ids, segment);
    begin = end;
  }
  pushText(codec, ids, generationPrompt);
  draft.tokens = ids.view;
  // Checked at the two boundaries a follow-up turn reuses: before the last message, and before the
  // last user message (where templates that re-render earlier replies, as Qwen3's does, change them).
  let lastUser = -1;
  for (let i = messages.length - 1; i >= 0 && lastUser === -1; i--) if (messages[i].role === 'user') lastUser = i;
  for (const cut of new Set([messages.length - 1, lastUser])) {
    if (cut < 1 || !draft.prefixStable) continue;
    const previous = codec.renderChat(messages.slice(0, cut), { ...options, addGenerationPrompt: false });
    draft.prefixStable = previous === text.slice(0, ends[cut - 1]);
  }
  return draft;
}

/** Reply spans → the ids this tenant's replies were sampled as, where remembered. Linear in the tokens. */
export function finishChatPrompt(draft: ChatPromptDraft, memory: ReplyMemory | null, tenantScope: string): ChatPrompt {
  if (memory === null || draft.replies.length === 0) return { tokens: draft.tokens, messageStarts: draft.messageStarts, prefixStable: draft.prefixStable };
  const recalled = draft.replies.map((reply) => memory.recall(tenantScope, reply.text));
  if (recalled.every((ids) => ids === undefined)) return { tokens: draft.tokens, messageStarts: draft.messageStarts, prefixStable: draft.prefixStable };
  const tokens = new TokenIds(draft.tokens.length + 64);
  const shifts: Array<{ at: number; delta: number }> = [];
  let cursor = 0;
  let delta = 0;
  draft.replies.forEach((reply, r) => {
    const ids = recalled[r];
    if (ids === undefined) return;
    tokens.append(draft.tokens.subarray(cursor, reply.at));
    tokens.append(ids);
    cursor = reply.at + reply.length;
    delta += ids.length - reply.length;
    shifts.push({ at: cursor, delta });
  });
  tokens.append(draft.tokens.subarray(cursor));
  let s = 0;
  let shift = 0;
  const messageStarts = draft.messageStarts.map((start) => {
    while (s < shifts.length && shifts[s].at <= start) shift = shifts[s++].delta;
    return start + shift;
  });
  return { tokens: tokens.view, messageStarts, prefixStable: draft.prefixStable };
}

/** draft + finish in one call, on the calling thread (small transcripts; tests). */
export class ChatPromptBuilder {
  constructor(
    private readonly codec: PromptCodec,
    private readonly memory: ReplyMemory | null,
  ) {}

  build(messages: readonly ChatMessage[], tools: readonly ToolSpec[] | undefined, tenantScope: string): ChatPrompt {
    return finishChatPrompt(draftChatPrompt(this.codec, messages, tools), this.memory, tenantScope);
  }
}

/** Plain completion prompt (`/v1/completions`): BOS + the text, no template; a client's token ids as they are. */
export function encodeCompletionPrompt(codec: PromptCodec, prompt: string | Uint32Array, limits?: PromptLimits): Uint32Array {
  if (typeof prompt !== 'string') return prompt;
  checkPromptLength(codec, prompt, limits);
  return encodeWithBos(codec, prompt);
}

function wholeDraft(codec: PromptCodec, full: string): ChatPromptDraft {
  return { tokens: encodeWithBos(codec, full), messageStarts: [], prefixStable: false, replies: [] };
}

function pushText(codec: PromptCodec, ids: TokenIds, text: string): void {
  if (ids.length === 0) ids.append(encodeWithBos(codec, text));
  else if (text !== '') ids.append(codec.encode(text));
}

/** `text`'s ids with the model's BOS first, unless the text already starts with it. */
export function encodeWithBos(codec: PromptCodec, text: string): Uint32Array {
  const { bosTokenId, bosText } = codec;
  const ids = text === '' ? new Uint32Array(0) : codec.encode(text);
  if (bosTokenId === null) return ids;
  if (ids[0] === bosTokenId || (bosText !== null && text.startsWith(bosText))) return ids;
  const withBos = new Uint32Array(ids.length + 1);
  withBos[0] = bosTokenId;
  withBos.set(ids, 1);
  return withBos;
}

/**
 * The text before an assistant reply's body in its segment: the generation
 * prompt, or (a template whose generation prompt depends on what came before:
 * DeepSeek V3 opens a reply after tool results with `<｜tool▁outputs▁end｜>`,
 * not `<｜Assistant｜>`) whatever precedes the message's own content when the
 * segment ends with content ‖ end of turn. null: no reply body to mark.
 */
function replyHead(segment: string, generationPrompt: string, endOfTurn: string | null, content: string | null): string | null {
  if (segment.startsWith(generationPrompt)) return generationPrompt;
  if (content === null || content === '') return null;
  const withoutEnd = endOfTurn !== null && endOfTurn !== '' && segment.endsWith(endOfTurn) ? segment.slice(0, segment.length - endOfTurn.length) : segment;
  return withoutEnd.endsWith(content) ? withoutEnd.slice(0, withoutEnd.length - content.length) : null;
}

function pushAssistantSegment(
  codec: PromptCodec,
  ids: TokenIds,
  replies: ChatPromptDraft['replies'],
  segment: string,
  generationPrompt: string,
  endOfTurn: string | null,
  content: string | null,
): void {
  const head = ids.length === 0 ? null : replyHead(segment, generationPrompt, endOfTurn, content);
  if (head === null) {
    pushText(codec, ids, segment);
    return;
  }
  if (head !== '') ids.append(codec.encode(head));
  const rest = segment.slice(head.length);
  const body = endOfTurn !== null && endOfTurn !== '' && rest.endsWith(endOfTurn) ? rest.slice(0, rest.length - endOfTurn.length) : rest;
  const tail = rest.slice(body.length);
  const at = ids.length;
  if (body !== '') ids.append(codec.encode(body));
  replies.push({ at, length: ids.length - at, text: body });
  if (tail !== '') ids.append(codec.encode(tail));
}

/** The text a template puts after an assistant reply's body (e.g. `<|im_end|>\n`); learned once per codec by rendering a probe. */
export function learnEndOfTurn(codec: PromptCodec): string | null {
  const known = endOfTurnByCodec.get(codec);
  if (known !== undefined) return known;
  let learned: string | null = null;
  try {
    const rendered = codec.renderChat(
      [
        { role: 'user', content: 'x' },
        { role: 'assistant', content: PROBE },
      ],
      { addGenerationPrompt: false },
    );
    const at = rendered.lastIndexOf(PROBE);
    learned = at === -1 ? null : rendered.slice(at + PROBE.length);
  } catch {
    // A template that cannot render the probe has no learnable end of turn: bodies keep their tail.
    learned = null;
  }
  endOfTurnByCodec.set(codec, learned);
  return learned;
}
