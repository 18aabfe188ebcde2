/**
 * OpenAI Responses API ⇄ the recipe's transcript, and the response shapes.
 *
 *   instructions                      → system message (first; not carried over by previous_response_id, as OpenAI)
 *   input: "text"                     → one user message
 *   input items:
 *     {role, content} / {type:'message'}   → a message (input_text / output_text parts joined)
 *     {type:'function_call'}               → a tool call of the assistant message before it (or a new one)
 *     {type:'function_call_output'}        → a tool message
 *     {type:'reasoning'}                   → reasoning_content of the assistant turn after it (the template decides)
 *
 * The transcript is the one Chat Completions builds for the same
 * conversation (assistant text + its calls in one message, content null for
 * a calls-only turn), so both APIs render the same prompt tokens.
 */
import { KvtError } from '../errors.ts';
import { reasoningFromToken } from './responses-include.ts';
import { constraintFromOpenAi, type ConstraintSpec } from './structured-output.ts';
import { argumentsAsJson, argumentsFromJson } from './tool-calls.ts';
import type { CacheUsage, ChatMessage, FinishReason, SamplingSpec, ToolCall, ToolSpec } from './types.ts';
import { samplingSpec, type SamplingLimits } from './sampling-spec.ts';

export interface ResponsesRequestBody {
  model: string;
  instructions?: string | null;
  input?: string | ResponsesInputItem[];
  tools?: Array<{ type: string; name?: string; description?: string | null; parameters?: Record<string, unknown> | null; strict?: boolean | null }>;
  tool_choice?: unknown;
  text?: { format?: { type: string; name?: string; schema?: unknown; strict?: boolean | null } | null } | null;
  max_output_tokens?: number | null;
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  seed?: number | null;
  stream?: boolean | null;
  store?: boolean | null;
  previous_response_id?: string | null;
  metadata?: Record<string, string> | null;
  parallel_tool_calls?: boolean | null;
  user?: string;
  kvtier_class?: string;
  chat_template_kwargs?: Record<string, unknown>;
  enable_thinking?: boolean;
  /** Extra output data (responses-include.ts). */
  include?: string[] | null;
  /** Run on after the POST returns (status queued → in_progress → completed; requires store). */
  background?: boolean | null;
  /** 'auto': drop the oldest input items until the prompt fits the context; 'disabled' (default): a 400. */
  truncation?: 'auto' | 'disabled' | null;
}

export interface ResponsesInputItem {
  type?: string;
  role?: string;
  content?: string | Array<{ type: string; text?: string }>;
  call_id?: string;
  name?: string;
  arguments?: string;
  output?: string | Array<{ type: string; text?: string }>;
  id?: string;
  /** A reasoning item's token from include: ["reasoning.encrypted_content"] (responses-include.ts). */
  encrypted_content?: string | null;
}

function invalid(message: string, param: string): KvtError {
  return new KvtError('KVT_ERR_REQUEST_INVALID', message, { param });
}

function joinParts(content: ResponsesInputItem['content'] | ResponsesInputItem['output'], at: string): string {
  if (content === undefined || content === null) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part, index) => {
      if ((part.type !== 'input_text' && part.type !== 'output_text' && part.type !== 'text') || typeof part.text !== 'string') {
        throw invalid(`${at}[${index}].type "${part.type}" is not supported: this server takes input_text / output_text parts only`, `${at}[${index}].type`);
      }
      return part.text;
    })
    .join('');
}

/** Input items → transcript messages (no instructions). */
export function messagesFromResponsesInput(input: ResponsesRequestBody['input'], param = 'input'): ChatMessage[] {
  if (input === undefined) return [];
  if (typeof input === 'string') return [{ role: 'user', content: input }];
  const messages: ChatMessage[] = [];
  // A reasoning item belongs to the assistant turn that follows it.
  let reasoning: string | undefined;
  const assistant = (message: ChatMessage): ChatMessage => {
    if (reasoning !== undefined) message.reasoning_content = reasoning;
    reasoning = undefined;
    return message;
  };
  input.forEach((item, index) => {
    const at = `${param}[${index}]`;
    const type = item.type ?? 'message';
    if (type === 'message') {
      const content = joinParts(item.content, `${at}.content`);
      switch (item.role) {
        case 'system':
        case 'developer':
          messages.push({ role: 'system', content });
          return;
        case 'user':
          messages.push({ role: 'user', content });
          return;
        case 'assistant':
          messages.push(assistant({ role: 'assistant', content }));
          return;
        default:
          throw invalid(`${at}.role "${String(item.role)}" is not one of system, developer, user, assistant`, `${at}.role`);
      }
    }
    if (type === 'function_call') {
      if (typeof item.call_id !== 'string' || item.call_id === '') throw invalid(`${at}.call_id is required for a function_call item`, `${at}.call_id`);
      if (typeof item.name !== 'string' || item.name === '') throw invalid(`${at}.name is required for a function_call item`, `${at}.name`);
      if (typeof item.arguments !== 'string') throw invalid(`${at}.arguments must be the call's arguments as a JSON string`, `${at}.arguments`);
      const call: ToolCall = { id: item.call_id, type: 'function', function: { name: item.name, arguments: argumentsFromJson(item.arguments) }, rawArguments: item.arguments };
      const last = messages[messages.length - 1];
      // Chat Completions carries a turn's text and its calls in one assistant message.
      if (last && last.role === 'assistant') {
        last.tool_calls = [...(last.tool_calls ?? []), call];
        if (last.content === '') last.content = null;
      } else messages.push(assistant({ role: 'assistant', content: null, tool_calls: [call] }));
      return;
    }
    if (type === 'function_call_output') {
      if (typeof item.call_id !== 'string' || item.call_id === '') throw invalid(`${at}.call_id is required for a function_call_output item: name the call this result answers`, `${at}.call_id`);
      messages.push({ role: 'tool', content: joinParts(item.output, `${at}.output`), tool_call_id: item.call_id });
      return;
    }
    if (type === 'reasoning') {
      const parts = (item as { content?: Array<{ text?: unknown }> }).content;
      let text = Array.isArray(parts) ? parts.map((p) => (typeof p.text === 'string' ? p.text : '')).join('') : '';
      // A stateless client (store: false) sends reasoning back as the token it was given.
      if (text === '' && typeof item.encrypted_content === 'string') text = reasoningFromToken(item.encrypted_content, `${at}.encrypted_content`);
      if (text !== '') reasoning = (reasoning ?? '') + text;
      return;
    }
    throw invalid(`${at}.type "${type}" is not one of message, function_call, function_call_output, reasoning`, `${at}.type`);
  });
  return messages;
}

export interface ResponsesInput {
  /** Input messages of this request (after a chained history, before the reply). */
  inputMessages: ChatMessage[];
  instructions: string | null;
  tools: ToolSpec[] | undefined;
  agentic: boolean;
}

export function responsesInput(body: ResponsesRequestBody): ResponsesInput {
  const inputMessages = messagesFromResponsesInput(body.input);
  const wantsNoTools = body.tool_choice === 'none';
  const tools = (body.tools ?? []).map((tool, index): ToolSpec => {
    if (tool.type !== 'function') throw invalid(`tools[${index}].type "${tool.type}" is not supported: this server runs function tools only`, `tools[${index}].type`);
    if (typeof tool.name !== 'string' || tool.name === '') throw invalid(`tools[${index}].name is required`, `tools[${index}].name`);
    const fn: ToolSpec['function'] = { name: tool.name };
    if (typeof tool.description === 'string') fn.description = tool.description;
    if (tool.parameters) fn.parameters = tool.parameters;
    return { type: 'function', function: fn };
  });
  const agentic = tools.length > 0 || inputMessages.some((m) => m.role === 'tool' || (m.tool_calls?.length ?? 0) > 0);
  return { inputMessages, instructions: body.instructions ?? null, tools: tools.length > 0 && !wantsNoTools ? tools : undefined, agentic };
}

/** The whole transcript: instructions, the chained history, this input. */
export function responsesTranscript(instructions: string | null, history: readonly ChatMessage[], input: readonly ChatMessage[]): ChatMessage[] {
  return [...(instructions !== null && instructions !== '' ? [{ role: 'system' as const, content: instructions }] : []), ...history, ...input];
}

export function samplingFromResponses(body: ResponsesRequestBody, limits: SamplingLimits): SamplingSpec {
  return samplingSpec(
    { maxTokens: body.max_output_tokens ?? limits.defaultMaxTokens, temperature: body.temperature ?? 1, topP: body.top_p ?? 1, topK: body.top_k ?? 0, seed: body.seed ?? 0, stopStrings: [] },
    limits,
  );
}

/** Renames the Chat Completions fields of a structured-output 400 to this API's. */
function renamed(error: unknown): unknown {
  if (!(error instanceof KvtError) || error.param === null) return error;
  const param = error.param
    .replace(/^response_format\.json_schema\.schema/, 'text.format.schema')
    .replace(/^response_format\.json_schema/, 'text.format')
    .replace(/^response_format/, 'text.format')
    .replace(/^tools\[(\d+)\]\.function\.parameters/, 'tools[$1].parameters')
    .replace(/^max_tokens$/, 'max_output_tokens');
  const message = error.message.replace(/response_format\.json_schema\.schema|response_format/g, 'text.format').replace(/\bmax_tokens\b/g, 'max_output_tokens');
  return new KvtError(error.code, message, { param, cause: error });
}

/** text.format and tool_choice → the same grammar constraint Chat Completions' response_format / tool_choice make. */
export function constraintFromResponses(body: ResponsesRequestBody, tools: readonly ToolSpec[] | undefined, toolCallFormat: 'hermes' | 'harmony' = 'hermes'): ConstraintSpec | undefined {
  let toolChoice: unknown = body.tool_choice;
  if (toolChoice !== null && typeof toolChoice === 'object') {
    const choice = toolChoice as { type?: unknown; name?: unknown };
    if (choice.type !== 'function' || typeof choice.name !== 'string') throw invalid('tool_choice must be "none", "auto", "required" or {"type": "function", "name": …}', 'tool_choice');
    toolChoice = { type: 'function', function: { name: choice.name } };
  }
  const format = body.text?.format;
  let responseFormat: unknown;
  if (format && format.type === 'json_schema') responseFormat = { type: 'json_schema', json_schema: { name: format.name, schema: format.schema, strict: format.strict } };
  else if (format) responseFormat = { type: format.type };
  try {
    return constraintFromOpenAi({ tool_choice: toolChoice, response_format: responseFormat }, tools, toolCallFormat);
  } catch (error) {
    throw renamed(error);
  }
}

export { renamed as responsesParamNames };

// --- output ------------------------------------------------------------------

export type ResponsesOutputItem =
  | { type: 'message'; id: string; status: 'completed' | 'incomplete'; role: 'assistant'; content: Array<{ type: 'output_text'; text: string; annotations: unknown[]; logprobs: unknown[] }> }
  | { type: 'function_call'; id: string; call_id: string; name: string; arguments: string; status: 'completed' }
  | { type: 'reasoning'; id: string; summary: unknown[]; content: Array<{ type: 'reasoning_text'; text: string }>; status: 'completed'; encrypted_content?: string };

export function outputTextPart(text: string): { type: 'output_text'; text: string; annotations: unknown[]; logprobs: unknown[] } {
  return { type: 'output_text', text, annotations: [], logprobs: [] };
}

export function functionCallItem(call: ToolCall, id: string): Extract<ResponsesOutputItem, { type: 'function_call' }> {
  return { type: 'function_call', id, call_id: call.id, name: call.function.name, arguments: argumentsAsJson(call), status: 'completed' };
}

export function responsesUsage(usage: CacheUsage, reasoningTokens = 0): Record<string, unknown> {
  return {
    input_tokens: usage.promptTokens,
    input_tokens_details: { cached_tokens: usage.cachedTokens },
    output_tokens: usage.completionTokens,
    output_tokens_details: { reasoning_tokens: reasoningTokens },
    total_tokens: usage.promptTokens + usage.completionTokens,
  };
}

export interface ResponseShape {
  id: string;
  createdAt: number;
  model: string;
  body: ResponsesRequestBody;
  /** queued → in_progress → completed | incomplete | failed | cancelled (the last two: background runs). */
  status: 'queued' | 'in_progress' | 'completed' | 'incomplete' | 'failed' | 'cancelled';
  output: ResponsesOutputItem[];
  finishReason: FinishReason | null;
  usage: CacheUsage | null;
  store: boolean;
  reasoningTokens?: number;
  background?: boolean;
  /** A background run that failed: its error. */
  error?: { code: string; message: string } | null;
}

/** The Response object (GET, non-streamed POST, and the stream's created/in_progress/completed events). */
export function responseObject(shape: ResponseShape): Record<string, unknown> {
  const { body } = shape;
  return {
    id: shape.id,
    object: 'response',
    created_at: shape.createdAt,
    status: shape.status,
    background: shape.background === true,
    error: shape.error ?? null,
    incomplete_details: shape.status === 'incomplete' ? { reason: 'max_output_tokens' } : null,
    instructions: body.instructions ?? null,
    max_output_tokens: body.max_output_tokens ?? null,
    model: shape.model,
    output: shape.output,
    parallel_tool_calls: body.parallel_tool_calls ?? true,
    previous_response_id: body.previous_response_id ?? null,
    reasoning: { effort: null, summary: null },
    store: shape.store,
    temperature: body.temperature ?? 1,
    text: { format: body.text?.format ?? { type: 'text' } },
    tool_choice: body.tool_choice ?? 'auto',
    tools: body.tools ?? [],
    top_p: body.top_p ?? 1,
    truncation: body.truncation ?? 'disabled',
    usage: shape.usage ? responsesUsage(shape.usage, shape.reasoningTokens ?? 0) : null,
    user: body.user ?? null,
    metadata: body.metadata ?? {},
  };
}

/** The output items as transcript messages (what the next chained turn sends back): the Chat Completions assistant message. */
export function messagesFromOutput(output: readonly ResponsesOutputItem[]): ChatMessage[] {
  const text = output.filter((item) => item.type === 'message').map((item) => item.content.map((p) => p.text).join('')).join('');
  const calls = output.filter((item) => item.type === 'function_call');
  const message: ChatMessage = { role: 'assistant', content: calls.length > 0 && text === '' ? null : text };
  const thought = output.filter((item) => item.type === 'reasoning');
  if (thought.length > 0) message.reasoning_content = thought.map((item) => item.content.map((c) => c.text).join('')).join('');
  if (calls.length > 0) {
    message.tool_calls = calls.map((item) => ({ id: item.call_id, type: 'function', function: { name: item.name, arguments: argumentsFromJson(item.arguments) }, rawArguments: item.arguments }));
  }
  return [message];
}
