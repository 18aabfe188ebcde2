/**
 * gpt-oss replies in the harmony format (OpenAI's template: inference-core/synthetic/gptoss-template.ts):
 * the generation prompt ends with `<|start|>assistant`, and the model writes one or more messages
 *
 *   <|channel|>analysis<|message|>…<|end|><|start|>assistant<|channel|>final<|message|>…
 *   <|channel|>commentary to=functions.NAME <|constrain|>json<|message|>{…}      (then <|call|>)
 *    to=functions.NAME<|channel|>commentary json<|message|>{…}                    (the template's history form)
 *
 * ending the reply with <|return|> or <|call|> (end-of-generation ids, never text here). The
 * markers reach this text because llama.cpp (and kvtier's tokenizer) decode <|channel|>,
 * <|message|>, <|start|>, <|constrain|> and harmony's <|end|> as their text. Split like the
 * reasoning of `<think>` templates (recipe/reasoning.ts): analysis → reasoning, final and plain
 * commentary → content, a message to `functions.NAME` → a tool call. A reply that never writes a
 * header (a model ignoring the format) is all content, as llama.cpp's harmony parser reads it.
 */
import { createHash } from 'node:crypto';

import { argumentsFromJson, partialSuffixLength } from './tool-calls.ts';
import type { ConstraintSpec } from '../../inference-core/index.ts';
import type { PromptCodec, ToolCall } from './types.ts';

export const HARMONY_GENERATION_PROMPT = '<|start|>assistant';
const MESSAGE = '<|message|>';
const END = '<|end|>';
const START = '<|start|>';

/** Whether the prompt ends in harmony's generation prompt (the model writes a message header next). */
export function promptOpensHarmony(promptTail: string): boolean {
  return promptTail.endsWith(HARMONY_GENERATION_PROMPT);
}

interface Header {
  channel: string;
  recipient: string | null;
}

/** `<|channel|>commentary to=functions.f <|constrain|>json` (either order of channel and recipient). */
function parseHeader(text: string): Header {
  const channel = /<\|channel\|>\s*([\w-]+)/.exec(text)?.[1] ?? 'final';
  const recipient = /(?:^|\s)to=(\S+?)(?=\s|<\||$)/.exec(text)?.[1] ?? null;
  return { channel, recipient };
}

/** What a harmony reply's first message header begins with (a channel, or the recipient written before it). */
const HEADER_STARTS = ['<|channel|>', ' to=', 'to=', '<|constrain|>'];

/** Whether `text` (the reply's start) may still be, or already is, a header's beginning. */
function mayBeHeader(text: string): boolean {
  return HEADER_STARTS.some((m) => m.startsWith(text) || text.startsWith(m));
}

/** plain: the reply began with no header (a model ignoring the format): all of it is content, streamed as it comes. */
type State = 'header' | 'body' | 'between' | 'plain';

/** Streaming split of a harmony reply into reasoning, content and tool calls; markers split across pushes are held back. */
export class HarmonySplitter {
  private state: State = 'header';
  private held = '';
  private header: Header = { channel: 'final', recipient: null };
  private headerText = '';
  private sawMessage = false;
  private args = '';
  private readonly calls: Array<{ name: string; args: string }> = [];
  reasoning = '';
  content = '';
  /** Whether any analysis message was written (for reasoning_content: null when none). */
  opened = false;
  /** Inside an analysis message now. */
  get inReasoning(): boolean {
    return this.state === 'body' && this.header.channel === 'analysis' && this.header.recipient === null;
  }

  push(text: string): { reasoning: string; content: string } {
    this.held += text;
    let reasoning = '';
    let content = '';
    for (;;) {
      if (this.state === 'between') {
        // after <|end|>: `<|start|>assistant` opens the next message's header
        const at = this.held.indexOf(START);
        if (at === -1) {
          if (partialSuffixLength(this.held, START) === this.held.length) break;
          this.state = 'header'; // no <|start|>: read the rest as a header (lenient)
          continue;
        }
        const rest = this.held.slice(at + START.length);
        const role = /^[^<\s]*/.exec(rest)![0];
        if (role.length === rest.length) break; // the role may go on
        this.held = rest.slice(role.length);
        this.state = 'header';
        continue;
      }
      if (this.state === 'plain') {
        content += this.held;
        this.held = '';
        break;
      }
      if (this.state === 'header') {
        if (!this.sawMessage && this.held !== '' && !mayBeHeader(this.held)) {
          this.state = 'plain';
          continue;
        }
        const at = this.held.indexOf(MESSAGE);
        if (at === -1) break; // a header is short: hold it whole
        this.headerText = this.held.slice(0, at);
        this.header = parseHeader(this.headerText);
        this.held = this.held.slice(at + MESSAGE.length);
        this.sawMessage = true;
        this.state = 'body';
        if (this.header.channel === 'analysis' && this.header.recipient === null) this.opened = true;
        continue;
      }
      const end = this.held.indexOf(END);
      const keep = end === -1 ? partialSuffixLength(this.held, END) : 0;
      const body = end === -1 ? this.held.slice(0, this.held.length - keep) : this.held.slice(0, end);
      this.held = end === -1 ? this.held.slice(this.held.length - keep) : this.held.slice(end + END.length);
      const routed = this.route(body);
      reasoning += routed.reasoning;
      content += routed.content;
      if (end === -1) break;
      this.closeMessage();
      this.state = 'between';
    }
    this.reasoning += reasoning;
    this.content += content;
    return { reasoning, content };
  }

  private route(body: string): { reasoning: string; content: string } {
    if (this.header.recipient !== null) {
      this.args += body;
      return { reasoning: '', content: '' };
    }
    return this.header.channel === 'analysis' ? { reasoning: body, content: '' } : { reasoning: '', content: body };
  }

  private closeMessage(): void {
    const r = this.header.recipient;
    if (r !== null) this.calls.push({ name: r.startsWith('functions.') ? r.slice('functions.'.length) : r, args: this.args.trim() });
    this.args = '';
    this.header = { channel: 'final', recipient: null };
  }

  /** The held rest at the end of the reply (an unterminated message ends there; a reply with no header at all is content). */
  finish(): { reasoning: string; content: string } {
    let out = { reasoning: '', content: '' };
    if ((this.state === 'header' && !this.sawMessage) || this.state === 'plain') out = { reasoning: '', content: this.held };
    else if (this.state === 'body') out = this.route(this.held);
    if (this.state === 'body') this.closeMessage();
    this.held = '';
    this.reasoning += out.reasoning;
    this.content += out.content;
    return out;
  }

  /** The tool calls the reply made; ids are deterministic in the reply text, as recipe/tool-calls.ts's. */
  toolCalls(wholeText: string): ToolCall[] {
    return this.calls.map((c, i) => ({
      id: `call_${createHash('sha256').update(wholeText).update(String(i)).digest('hex').slice(0, 24)}`,
      type: 'function',
      // the text as written when it is a JSON object: a client echoing it back renders the same bytes (the
      // template prints argument text as is), so the next prompt keeps the reply's sampled tokens
      function: { name: c.name, arguments: typeof argumentsFromJson(c.args) === 'string' ? argumentsFromJson(c.args === '' ? '{}' : c.args) : c.args },
    }));
  }
}

/** Whole-reply split (tests, non-streamed callers). */
export function splitHarmony(text: string): { reasoning: string | null; content: string; toolCalls: ToolCall[] } {
  const s = new HarmonySplitter();
  s.push(text);
  s.finish();
  return { reasoning: s.opened ? s.reasoning : null, content: s.content, toolCalls: s.toolCalls(text) };
}

/** The tool-call format of a codec's template, for the forced-call grammar (recipe/structured-output.ts). */
export function toolCallFormatOf(codec: Pick<PromptCodec, 'harmony'>): 'hermes' | 'harmony' {
  return codec.harmony ? 'harmony' : 'hermes';
}

/**
 * A forced harmony tool call ends on <|call|>, harmony's "the reply is a call" end: the grammar then allows only
 * that end-of-generation id (not <|return|>), the id OpenAI's template closes a history call with.
 */
export function harmonyCallStops<S extends { stopTokenIds: readonly number[] }>(sampling: S, constraint: ConstraintSpec | undefined, codec: Pick<PromptCodec, 'harmony'>): S {
  if (!codec.harmony || constraint?.kind !== 'tool_call' || constraint.format !== 'harmony') return sampling;
  return { ...sampling, stopTokenIds: [codec.harmony.callTokenId] };
}
