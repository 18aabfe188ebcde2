/**
 * Reasoning ("thinking") content of templates that let the model think first
 * (DeepSeek R1 / V3.1, Qwen3 with enable_thinking): the reply is
 *
 *   [<think>] reasoning </think> content
 *
 * where `<think>` is either the reply's first text (the model opens it: Qwen3,
 * R1 without the forced tag) or already the end of the prompt (the template's
 * generation prompt opens it: R1's newer templates, V3.1 with thinking). The
 * reasoning goes to `reasoning_content` (DeepSeek's field), Anthropic
 * `thinking` blocks or Responses `reasoning` items; the content stays the
 * reply. A reply that never opens a think block is all content; one whose
 * think block never closes (max tokens ran out) is all reasoning.
 *
 * Follow-up turns send the content back (without the reasoning, as DeepSeek
 * asks); these templates drop earlier reasoning themselves, so the prompt of
 * the next turn keeps the previous prompt as its prefix.
 */
import { partialSuffixLength } from './tool-calls.ts';
import type { PromptCodec } from './types.ts';

export const THINK_OPEN = '<think>';
export const THINK_CLOSE = '</think>';

/** Whether the prompt's text ends inside an opened think block (the generation prompt opened it). */
export function promptOpensThinking(promptTail: string): boolean {
  const at = promptTail.lastIndexOf(THINK_OPEN);
  return at !== -1 && promptTail.slice(at + THINK_OPEN.length).trim() === '' && !promptTail.slice(at).includes(THINK_CLOSE);
}

type State = 'start' | 'reasoning' | 'content';

/** Streaming split of reply text into reasoning and content; markers split across pushes are held back. */
export class ReasoningSplitter {
  private state: State;
  private held = '';
  /** After `</think>` the separating whitespace is not content. */
  private trimContentStart = false;
  reasoning = '';
  content = '';

  /** true: the prompt opened the block; false: the reply may open it; 'off': all content (raw completions). */
  constructor(startsInReasoning: boolean | 'off') {
    this.state = startsInReasoning === 'off' ? 'content' : startsInReasoning ? 'reasoning' : 'start';
  }

  /** Whether the reply had a think block (opened by the prompt or by the reply). */
  get opened(): boolean {
    return this.state === 'reasoning' || this.closed;
  }

  private closed = false;

  /** The think block was opened and not closed yet. */
  get inReasoning(): boolean {
    return this.state === 'reasoning';
  }

  push(text: string): { reasoning: string; content: string } {
    this.held += text;
    let reasoning = '';
    let content = '';
    for (;;) {
      if (this.state === 'start') {
        const lead = this.held.replace(/^\s+/, '');
        if (lead.startsWith(THINK_OPEN)) {
          this.held = lead.slice(THINK_OPEN.length);
          this.state = 'reasoning';
          continue;
        }
        if (lead === '' || THINK_OPEN.startsWith(lead)) break; // could still open
        this.state = 'content';
        continue;
      }
      if (this.state === 'reasoning') {
        const close = this.held.indexOf(THINK_CLOSE);
        if (close !== -1) {
          reasoning += this.held.slice(0, close);
          this.held = this.held.slice(close + THINK_CLOSE.length);
          this.state = 'content';
          this.closed = true;
          this.trimContentStart = true;
          continue;
        }
        const keep = partialSuffixLength(this.held, THINK_CLOSE);
        reasoning += this.held.slice(0, this.held.length - keep);
        this.held = this.held.slice(this.held.length - keep);
        break;
      }
      if (this.trimContentStart) {
        this.held = this.held.replace(/^\s+/, '');
        if (this.held === '') break;
        this.trimContentStart = false;
      }
      content += this.held;
      this.held = '';
      break;
    }
    this.reasoning += reasoning;
    this.content += content;
    return { reasoning, content };
  }

  /** The held rest at the end of the reply. */
  finish(): { reasoning: string; content: string } {
    const held = this.held;
    this.held = '';
    if (this.state === 'reasoning') {
      this.reasoning += held;
      return { reasoning: held, content: '' };
    }
    const content = this.trimContentStart ? held.replace(/^\s+/, '') : held;
    this.content += content;
    return { reasoning: '', content };
  }
}

/** Whole-reply split (tests, non-streamed callers). */
export function splitReasoning(text: string, startsInReasoning: boolean): { reasoning: string | null; content: string } {
  const splitter = new ReasoningSplitter(startsInReasoning);
  splitter.push(text);
  splitter.finish();
  return { reasoning: splitter.opened ? splitter.reasoning : null, content: splitter.content };
}

/**
 * The suffix of a reply's sampled ids that decodes to exactly its content (the
 * part after the think block), or null when no token boundary falls there.
 * Re-encoding the content may give other ids than were sampled; a turn that
 * sends the content back recalls these, so its prompt keeps the stored KV.
 */
export function contentIdsOf(codec: Pick<PromptCodec, 'decode'>, content: string, replyIds: readonly number[]): number[] | null {
  if (content === '' || replyIds.length === 0) return null;
  // The decoded suffix only grows as its start moves left: the last start whose suffix is at least as long as the content.
  let lo = 0;
  let hi = replyIds.length - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (codec.decode(replyIds.slice(mid)).length >= content.length) lo = mid;
    else hi = mid - 1;
  }
  for (let from = lo; from >= Math.max(0, lo - 2); from--) {
    const ids = replyIds.slice(from);
    if (codec.decode(ids) === content) return ids;
  }
  return null;
}

/**
 * Template variables of a request: `chat_template_kwargs` (vLLM's field), plus
 * the thinking switch where the request says it another way — a top-level
 * `enable_thinking` (Qwen3's / DashScope's field) or an explicit Anthropic
 * `thinking: {type: 'enabled' | 'disabled'}` — as `enable_thinking` (Qwen3)
 * and `thinking` (DeepSeek V3.1). chat_template_kwargs wins where both say it.
 */
export function templateKwargsOf(body: { chat_template_kwargs?: Record<string, unknown> | null; enable_thinking?: unknown; thinking?: unknown }): Record<string, unknown> | undefined {
  let switchOn: boolean | undefined;
  if (typeof body.enable_thinking === 'boolean') switchOn = body.enable_thinking;
  const anthropic = body.thinking as { type?: unknown } | undefined;
  if (anthropic && typeof anthropic === 'object' && (anthropic.type === 'enabled' || anthropic.type === 'disabled')) switchOn = anthropic.type === 'enabled';
  const kwargs = { ...(switchOn !== undefined ? { enable_thinking: switchOn, thinking: switchOn } : {}), ...(body.chat_template_kwargs ?? {}) };
  return Object.keys(kwargs).length > 0 ? kwargs : undefined;
}
