/**
 * Tool calls in generated text → structured calls, for the Hermes/Qwen
 * format most chat templates (and the demo models' template) use:
 *
 *   <tool_call>
 *   {"name": "get_weather", "arguments": {"city": "Paris"}}
 *   </tool_call>
 *
 * Text that is not in this format stays plain content. `ToolCallStreamSplitter`
 * does the same incrementally: content is streamed as it comes, and from the
 * first `<tool_call>` on the text is held back until the end of the reply.
 */
import { createHash } from 'node:crypto';

import type { ToolCall } from './types.ts';

export const TOOL_CALL_OPEN = '<tool_call>';
export const TOOL_CALL_CLOSE = '</tool_call>';

export interface ParsedReply {
  content: string;
  toolCalls: ToolCall[];
}

export function parseToolCalls(text: string): ParsedReply {
  const first = text.indexOf(TOOL_CALL_OPEN);
  if (first === -1) return { content: text, toolCalls: [] };
  const toolCalls: ToolCall[] = [];
  let cursor = first;
  while (cursor < text.length) {
    const open = text.indexOf(TOOL_CALL_OPEN, cursor);
    if (open === -1) {
      if (text.slice(cursor).trim() !== '') return { content: text, toolCalls: [] };
      break;
    }
    if (text.slice(cursor, open).trim() !== '') return { content: text, toolCalls: [] };
    const close = text.indexOf(TOOL_CALL_CLOSE, open);
    if (close === -1) return { content: text, toolCalls: [] };
    const call = parseOneCall(text.slice(open + TOOL_CALL_OPEN.length, close), toolCalls.length, text);
    if (!call) return { content: text, toolCalls: [] };
    toolCalls.push(call);
    cursor = close + TOOL_CALL_CLOSE.length;
  }
  return { content: text.slice(0, first).replace(/\s+$/, ''), toolCalls };
}

function parseOneCall(body: string, index: number, wholeText: string): ToolCall | null {
  let value: unknown;
  try {
    value = JSON.parse(body.trim());
  } catch {
    return null;
  }
  const record = value as { name?: unknown; arguments?: unknown; parameters?: unknown } | null;
  if (!record || typeof record !== 'object' || typeof record.name !== 'string' || record.name === '') return null;
  const args = record.arguments ?? record.parameters ?? {};
  if (typeof args !== 'object' && typeof args !== 'string') return null;
  // Deterministic ids: the same generated text gives the same ids, so a client echoing them back renders the same prompt.
  const id = `call_${createHash('sha256').update(wholeText).update(String(index)).digest('hex').slice(0, 24)}`;
  return { id, type: 'function', function: { name: record.name, arguments: args as Record<string, unknown> | string } };
}

/** Arguments as the JSON string OpenAI's API carries. */
export function argumentsAsJson(call: ToolCall): string {
  return typeof call.function.arguments === 'string' ? call.function.arguments : JSON.stringify(call.function.arguments);
}

/** Arguments as the object Anthropic's `tool_use.input` carries. */
export function argumentsAsObject(call: ToolCall): Record<string, unknown> {
  if (typeof call.function.arguments !== 'string') return call.function.arguments;
  try {
    const parsed = JSON.parse(call.function.arguments) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : { value: parsed };
  } catch {
    return { raw: call.function.arguments };
  }
}

/** OpenAI sends arguments as a JSON string; templates want the object. Invalid JSON stays a string. */
export function argumentsFromJson(json: string): Record<string, unknown> | string {
  try {
    const parsed = JSON.parse(json) as unknown;
    return parsed && typeof parsed === 'object' && !Array.isArray(parsed) ? (parsed as Record<string, unknown>) : json;
  } catch {
    return json;
  }
}

/**
 * Streaming: `push(text)` returns the content that is safe to send now; from
 * the first `<tool_call>` on (or a tail that may become one) text is held.
 * `finish()` parses what was held.
 */
export class ToolCallStreamSplitter {
  private held = '';
  private inToolCalls = false;
  private sentContent = '';

  constructor(private readonly enabled: boolean) {}

  push(text: string): string {
    if (!this.enabled) {
      this.sentContent += text;
      return text;
    }
    this.held += text;
    if (this.inToolCalls) return '';
    const open = this.held.indexOf(TOOL_CALL_OPEN);
    if (open !== -1) {
      this.inToolCalls = true;
      const safe = this.held.slice(0, open);
      this.held = this.held.slice(open);
      this.sentContent += safe;
      return safe;
    }
    const keep = partialSuffixLength(this.held, TOOL_CALL_OPEN);
    const safe = this.held.slice(0, this.held.length - keep);
    this.held = this.held.slice(this.held.length - keep);
    this.sentContent += safe;
    return safe;
  }

  /** The rest: more content to send (when the held text was not tool calls) and the parsed calls. */
  finish(): { content: string; toolCalls: ToolCall[] } {
    const held = this.held;
    this.held = '';
    if (!this.inToolCalls) {
      this.sentContent += held;
      return { content: held, toolCalls: [] };
    }
    const parsed = parseToolCalls(this.sentContent + held);
    if (parsed.toolCalls.length === 0) {
      this.sentContent += held;
      return { content: held, toolCalls: [] };
    }
    return { content: '', toolCalls: parsed.toolCalls };
  }
}

/** Length of the longest suffix of `text` that is a proper prefix of `marker`. */
export function partialSuffixLength(text: string, marker: string): number {
  for (let n = Math.min(marker.length - 1, text.length); n > 0; n--) {
    if (text.endsWith(marker.slice(0, n))) return n;
  }
  return 0;
}
