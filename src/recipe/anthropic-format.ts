/**
 * Anthropic Messages API ⇄ the recipe's transcript, responses and SSE events.
 *
 * Content blocks map onto the HF transcript as:
 *   system (string | text blocks)      → one system message
 *   user text blocks                   → a user message
 *   user tool_result blocks            → one tool message each (before the user text)
 *   assistant text + tool_use blocks   → an assistant message with tool_calls
 *                                        (content null when there is no text, as OpenAI's)
 */
import { KvtError } from '../errors.ts';
import { argumentsAsObject } from './tool-calls.ts';
import { checkJsonSchema } from './tool-schemas.ts';
import type { ChatInput } from './openai-format.ts';
import { samplingSpec, type SamplingLimits } from './sampling-spec.ts';
import type { CacheUsage, ChatMessage, FinishReason, SamplingSpec, ToolCall, ToolSpec } from './types.ts';
import { anthropicUsage } from './usage.ts';

type TextBlock = { type: 'text'; text: string };
type ToolUseBlock = { type: 'tool_use'; id: string; name: string; input: Record<string, unknown> };
type ToolResultBlock = { type: 'tool_result'; tool_use_id: string; content?: string | TextBlock[]; is_error?: boolean };
type ContentBlock = TextBlock | ToolUseBlock | ToolResultBlock | { type: string };

export interface AnthropicRequestBody {
  model: string;
  max_tokens: number;
  messages: Array<{ role: 'user' | 'assistant'; content: string | ContentBlock[] }>;
  system?: string | TextBlock[];
  tools?: Array<{ name: string; description?: string; input_schema: Record<string, unknown> }>;
  tool_choice?: { type: string };
  temperature?: number;
  top_p?: number;
  top_k?: number;
  stop_sequences?: string[];
  stream?: boolean;
  metadata?: Record<string, unknown>;
  kvtier_class?: string;
  /** {type:'enabled', budget_tokens}: the reply's reasoning comes back as `thinking` blocks (else it is left out). */
  thinking?: { type: string; budget_tokens?: number };
  /** Template variables for the render (vLLM's chat_template_kwargs, e.g. enable_thinking). */
  chat_template_kwargs?: Record<string, unknown>;
}

export function chatInputFromAnthropic(body: AnthropicRequestBody): ChatInput {
  const messages: ChatMessage[] = [];
  let agentic = false;
  if (body.system !== undefined) {
    const system = typeof body.system === 'string' ? body.system : body.system.map((block, i) => textOf(block, `system[${i}]`)).join('');
    if (system !== '') messages.push({ role: 'system', content: system });
  }
  // Ids of the tool_use blocks so far: a tool_result answers one of them.
  const toolUses = new Set<string>();
  body.messages.forEach((message, index) => {
    const at = `messages[${index}]`;
    if (typeof message.content === 'string') {
      messages.push({ role: message.role, content: message.content });
      return;
    }
    if (message.role === 'user') {
      const texts: string[] = [];
      message.content.forEach((block, b) => {
        if (block.type === 'text') texts.push(textOf(block, `${at}.content[${b}]`));
        else if (block.type === 'tool_result') {
          agentic = true;
          const result = block as ToolResultBlock;
          checkToolUseId(result.tool_use_id, toolUses, `${at}.content[${b}].tool_use_id`);
          const content = result.content === undefined ? '' : typeof result.content === 'string' ? result.content : result.content.map((t, i) => textOf(t, `${at}.content[${b}].content[${i}]`)).join('');
          messages.push({ role: 'tool', content: result.is_error ? `Error: ${content}` : content, tool_call_id: result.tool_use_id });
        } else throw unsupportedBlock(block.type, `${at}.content[${b}].type`);
      });
      if (texts.length > 0) messages.push({ role: 'user', content: texts.join('') });
      return;
    }
    const texts: string[] = [];
    const thoughts: string[] = [];
    const toolCalls: ToolCall[] = [];
    message.content.forEach((block, b) => {
      if (block.type === 'text') texts.push(textOf(block, `${at}.content[${b}]`));
      else if (block.type === 'tool_use') {
        agentic = true;
        const use = block as ToolUseBlock;
        if (typeof use.id !== 'string' || use.id === '') throw invalidBlock(`${at}.content[${b}].id is required for a tool_use block`, `${at}.content[${b}].id`);
        if (typeof use.name !== 'string' || use.name === '') throw invalidBlock(`${at}.content[${b}].name is required for a tool_use block`, `${at}.content[${b}].name`);
        toolUses.add(use.id);
        toolCalls.push({ id: use.id, type: 'function', function: { name: use.name, arguments: use.input ?? {} } });
      } else if (block.type === 'thinking') {
        const thinking = (block as { thinking?: unknown }).thinking;
        if (typeof thinking === 'string') thoughts.push(thinking);
      } else if (block.type === 'redacted_thinking') {
        // Nothing readable to render.
      } else throw unsupportedBlock(block.type, `${at}.content[${b}].type`);
    });
    // No text beside the tool_use blocks: content null, the shape of an OpenAI tool-call turn.
    const text = texts.join('');
    const out: ChatMessage = { role: 'assistant', content: text === '' && toolCalls.length > 0 ? null : text };
    if (toolCalls.length > 0) out.tool_calls = toolCalls;
    // Thinking blocks sent back are the turn's reasoning: the template decides whether to render them.
    if (thoughts.length > 0) out.reasoning_content = thoughts.join('');
    messages.push(out);
  });
  (body.tools ?? []).forEach((tool, index) => checkJsonSchema(tool.input_schema, `tools[${index}].input_schema`));
  const wantsNoTools = body.tool_choice?.type === 'none';
  const tools =
    body.tools && body.tools.length > 0 && !wantsNoTools
      ? body.tools.map((tool): ToolSpec => ({ type: 'function', function: { name: tool.name, description: tool.description, parameters: tool.input_schema } }))
      : undefined;
  if (body.tools && body.tools.length > 0) agentic = true;
  return { messages, tools, agentic };
}

function textOf(block: ContentBlock, at: string): string {
  if (block.type !== 'text' || typeof (block as TextBlock).text !== 'string') throw unsupportedBlock(block.type, `${at}.type`);
  return (block as TextBlock).text;
}

function invalidBlock(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

/** A tool_result names the tool_use it answers, made by an earlier assistant turn (the reference API's 400 otherwise). */
function checkToolUseId(id: unknown, toolUses: ReadonlySet<string>, param: string): void {
  if (typeof id !== 'string' || id === '') throw invalidBlock(`${param} is required for a tool_result block: name the tool_use it answers`, param);
  if (!toolUses.has(id)) throw invalidBlock(`${param} "${id}" answers no tool_use: no earlier assistant turn has a tool_use block with this id`, param);
}

function unsupportedBlock(type: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', `${param} "${type}" is not supported here: use text, tool_use (assistant) or tool_result (user) blocks`, { param });
}

export function samplingFromAnthropic(body: AnthropicRequestBody, limits: SamplingLimits): SamplingSpec {
  return samplingSpec(
    {
      maxTokens: body.max_tokens,
      temperature: body.temperature ?? 1,
      topP: body.top_p ?? 1,
      topK: body.top_k ?? 0,
      seed: 0,
      stopStrings: (body.stop_sequences ?? []).filter((s) => s !== ''),
    },
    limits,
  );
}

export type AnthropicStopReason = 'end_turn' | 'max_tokens' | 'stop_sequence' | 'tool_use';

export function anthropicStopReason(reason: FinishReason, stopSequence: string | null): AnthropicStopReason {
  if (reason === 'tool_calls') return 'tool_use';
  if (reason === 'length') return 'max_tokens';
  return stopSequence !== null ? 'stop_sequence' : 'end_turn';
}

export interface AnthropicReply {
  id: string;
  model: string;
  content: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  stopSequence: string | null;
  usage: CacheUsage;
  /** The reply's reasoning, when the request enabled thinking and the reply had a think block. */
  thinking?: string | null;
}

export function anthropicContentBlocks(content: string, toolCalls: ToolCall[], thinking?: string | null): Array<Record<string, unknown>> {
  const blocks: Array<Record<string, unknown>> = [];
  if (thinking !== undefined && thinking !== null) blocks.push({ type: 'thinking', thinking, signature: '' });
  if (content !== '' || toolCalls.length === 0) blocks.push({ type: 'text', text: content });
  for (const call of toolCalls) blocks.push({ type: 'tool_use', id: toolUseId(call), name: call.function.name, input: argumentsAsObject(call) });
  return blocks;
}

/** Anthropic ids look like `toolu_…`; an id we made (`call_…`) is re-prefixed, a client's own id is kept. */
export function toolUseId(call: ToolCall): string {
  return call.id.startsWith('call_') ? `toolu_${call.id.slice('call_'.length)}` : call.id;
}

export function anthropicResponse(reply: AnthropicReply): Record<string, unknown> {
  return {
    id: reply.id,
    type: 'message',
    role: 'assistant',
    model: reply.model,
    content: anthropicContentBlocks(reply.content, reply.toolCalls, reply.thinking),
    stop_reason: anthropicStopReason(reply.finishReason, reply.stopSequence),
    stop_sequence: reply.stopSequence,
    usage: anthropicUsage(reply.usage),
  };
}

export function anthropicMessageStart(id: string, model: string, usage: CacheUsage): Record<string, unknown> {
  return {
    type: 'message_start',
    message: { id, type: 'message', role: 'assistant', model, content: [], stop_reason: null, stop_sequence: null, usage: anthropicUsage(usage) },
  };
}
