/**
 * OpenAI chat completions / completions ⇄ the recipe's transcript and the
 * response shapes (plain and streamed chunks). Structural validation is the
 * route's JSON schema; what a schema cannot say (content part kinds, a tool
 * result without an id) is checked here and named by its field.
 */
import { KvtError } from '../errors.ts';
import { argumentsAsJson, argumentsFromJson } from './tool-calls.ts';
import { checkToolResults } from './tool-history.ts';
import { checkJsonSchema } from './tool-schemas.ts';
import type { ChatMessage, FinishReason, SamplingSpec, ToolCall, ToolSpec } from './types.ts';
import { samplingSpec, type SamplingLimits } from './sampling-spec.ts';
import { openAiUsage } from './usage.ts';
import type { CacheUsage } from './types.ts';

type OpenAiContent = string | null | undefined | Array<{ type: string; text?: string }>;

/** Sampling, streaming and class fields that both OpenAI routes accept. */
interface OpenAiCommonFields {
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number | null;
  seed?: number | null;
  stop?: string | string[] | null;
  /** Token id → bias added to its logit (form and range checked by the schema, the vocabulary by the route). */
  logit_bias?: Record<string, number> | null;
  presence_penalty?: number | null;
  frequency_penalty?: number | null;
  n?: number | null;
  stream?: boolean | null;
  stream_options?: { include_usage?: boolean } | null;
  kvtier_class?: string;
}

export interface OpenAiChatRequestBody extends OpenAiCommonFields {
  model: string;
  messages: Array<{
    role: string;
    content?: OpenAiContent;
    name?: string;
    tool_calls?: Array<{ id: string; type?: string; function: { name: string; arguments: string } }>;
    tool_call_id?: string;
    reasoning_content?: string | null;
  }>;
  tools?: Array<{ type: string; function: { name: string; description?: string; parameters?: Record<string, unknown> } }>;
  tool_choice?: unknown;
  max_tokens?: number | null;
  max_completion_tokens?: number | null;
  user?: string;
  /** Template variables for the render (vLLM's chat_template_kwargs, e.g. Qwen3's enable_thinking). */
  chat_template_kwargs?: Record<string, unknown>;
  /** Qwen3's thinking switch as a top-level field (DashScope, SGLang); see templateKwargsOf. */
  enable_thinking?: boolean;
}

export interface OpenAiCompletionRequestBody extends OpenAiCommonFields {
  model: string;
  prompt: string | number[] | string[];
  max_tokens?: number | null;
  echo?: boolean | null;
}

export interface ChatInput {
  messages: ChatMessage[];
  tools: ToolSpec[] | undefined;
  /** Whether the request carries tools or tool results (→ traffic class `agent`). */
  agentic: boolean;
}

export function chatInputFromOpenAi(body: OpenAiChatRequestBody): ChatInput {
  let agentic = false;
  const messages: ChatMessage[] = body.messages.map((message, index) => {
    const at = `messages[${index}]`;
    const content = flattenContent(message.content, `${at}.content`);
    switch (message.role) {
      case 'system':
      case 'developer':
        return { role: 'system', content };
      case 'user':
        return { role: 'user', content };
      case 'assistant': {
        const hasToolCalls = message.tool_calls !== undefined && message.tool_calls.length > 0;
        // A tool-call turn without text is content null (null, absent or ""): some templates (DeepSeek V3) render the calls only then.
        const out: ChatMessage = { role: 'assistant', content: hasToolCalls && content === '' ? null : content };
        if (typeof message.reasoning_content === 'string') out.reasoning_content = message.reasoning_content;
        if (hasToolCalls) {
          agentic = true;
          out.tool_calls = message.tool_calls!.map(
            (call): ToolCall => ({
              id: call.id,
              type: 'function',
              function: { name: call.function.name, arguments: argumentsFromJson(call.function.arguments) },
              rawArguments: call.function.arguments,
            }),
          );
        }
        return out;
      }
      case 'tool': {
        agentic = true;
        if (typeof message.tool_call_id !== 'string' || message.tool_call_id === '') {
          throw new KvtError('KVT_ERR_REQUEST_INVALID', `${at}.tool_call_id is required for role "tool": name the tool call this result answers`, { param: `${at}.tool_call_id` });
        }
        const out: ChatMessage = { role: 'tool', content, tool_call_id: message.tool_call_id };
        if (message.name) out.name = message.name;
        return out;
      }
      default:
        throw new KvtError('KVT_ERR_REQUEST_INVALID', `${at}.role "${message.role}" is not one of system, developer, user, assistant, tool`, { param: `${at}.role` });
    }
  });
  checkToolResults(messages, (index) => `messages[${index}].tool_call_id`);
  (body.tools ?? []).forEach((tool, index) => {
    if (tool.function.parameters !== undefined) checkJsonSchema(tool.function.parameters, `tools[${index}].function.parameters`);
  });
  const wantsNoTools = body.tool_choice === 'none';
  const tools = body.tools && body.tools.length > 0 && !wantsNoTools ? body.tools.map((tool): ToolSpec => ({ type: 'function', function: { ...tool.function } })) : undefined;
  if (body.tools && body.tools.length > 0) agentic = true;
  return { messages, tools, agentic };
}

function flattenContent(content: OpenAiContent, at: string): string {
  if (content === null || content === undefined) return '';
  if (typeof content === 'string') return content;
  return content
    .map((part, index) => {
      if (part.type !== 'text' || typeof part.text !== 'string') {
        throw new KvtError('KVT_ERR_REQUEST_INVALID', `${at}[${index}].type "${part.type}" is not supported: this server takes text parts only`, { param: `${at}[${index}].type` });
      }
      return part.text;
    })
    .join('');
}

export type { SamplingLimits } from './sampling-spec.ts';

export function samplingFromOpenAi(body: OpenAiChatRequestBody | OpenAiCompletionRequestBody, limits: SamplingLimits): SamplingSpec {
  if (body.n !== undefined && body.n !== null && body.n !== 1) {
    throw new KvtError('KVT_ERR_REQUEST_INVALID', `n=${body.n} is not supported: this server returns one choice (n=1)`, { param: 'n' });
  }
  const maxTokens = ('max_completion_tokens' in body ? body.max_completion_tokens : undefined) ?? body.max_tokens ?? limits.defaultMaxTokens;
  const stop = body.stop === null || body.stop === undefined ? [] : typeof body.stop === 'string' ? [body.stop] : body.stop;
  return samplingSpec(
    {
      maxTokens,
      temperature: body.temperature ?? 1,
      topP: body.top_p ?? 1,
      topK: body.top_k ?? 0,
      seed: body.seed ?? 0,
      stopStrings: stop.filter((s) => s !== ''),
      ...logitAdjustFromOpenAi(body),
    },
    limits,
  );
}

/** logit_bias and the two penalties, present only where they change something (a default request's job stays as it was). */
function logitAdjustFromOpenAi(body: OpenAiCommonFields): Pick<SamplingSpec, 'logitBias' | 'presencePenalty' | 'frequencyPenalty'> {
  const bias = Object.entries(body.logit_bias ?? {})
    .map(([id, value]) => [Number(id), value] as [number, number])
    .filter(([, value]) => value !== 0);
  return {
    ...(bias.length > 0 ? { logitBias: bias } : {}),
    ...(body.presence_penalty ? { presencePenalty: body.presence_penalty } : {}),
    ...(body.frequency_penalty ? { frequencyPenalty: body.frequency_penalty } : {}),
  };
}

export function openAiFinishReason(reason: FinishReason): 'stop' | 'length' | 'tool_calls' {
  return reason;
}

export interface ChatReply {
  id: string;
  created: number;
  model: string;
  content: string;
  toolCalls: ToolCall[];
  finishReason: FinishReason;
  usage: CacheUsage;
  systemFingerprint: string;
  /** The reply's think block (DeepSeek's reasoning_content), null without one. */
  reasoning?: string | null;
  reasoningTokens?: number;
}

export function openAiChatResponse(reply: ChatReply): Record<string, unknown> {
  const message: Record<string, unknown> = { role: 'assistant', content: reply.toolCalls.length > 0 && reply.content === '' ? null : reply.content, refusal: null };
  if (reply.reasoning !== undefined && reply.reasoning !== null) message.reasoning_content = reply.reasoning;
  if (reply.toolCalls.length > 0) message.tool_calls = reply.toolCalls.map(openAiToolCall);
  return {
    id: reply.id,
    object: 'chat.completion',
    created: reply.created,
    model: reply.model,
    system_fingerprint: reply.systemFingerprint,
    choices: [{ index: 0, message, logprobs: null, finish_reason: reply.finishReason }],
    usage: openAiUsage(reply.usage, reply.reasoning !== undefined && reply.reasoning !== null ? reply.reasoningTokens : undefined),
  };
}

export function openAiToolCall(call: ToolCall, index?: number): Record<string, unknown> {
  const out: Record<string, unknown> = { id: call.id, type: 'function', function: { name: call.function.name, arguments: argumentsAsJson(call) } };
  if (index !== undefined) out.index = index;
  return out;
}

export interface ChunkBase {
  id: string;
  created: number;
  model: string;
  systemFingerprint: string;
}

/** The fields every OpenAI response object and chunk starts with, in OpenAI's order. */
function openAiHead(base: ChunkBase, object: 'chat.completion.chunk' | 'text_completion'): Record<string, unknown> {
  return { id: base.id, object, created: base.created, model: base.model, system_fingerprint: base.systemFingerprint };
}

export function openAiChatChunk(base: ChunkBase, delta: Record<string, unknown>, finishReason: FinishReason | null): Record<string, unknown> {
  return { ...openAiHead(base, 'chat.completion.chunk'), choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }] };
}

export function openAiUsageChunk(base: ChunkBase, usage: CacheUsage, object: 'chat.completion.chunk' | 'text_completion', reasoningTokens?: number): Record<string, unknown> {
  return { ...openAiHead(base, object), choices: [], usage: openAiUsage(usage, reasoningTokens) };
}

export function openAiCompletionResponse(base: ChunkBase, text: string, finishReason: FinishReason, usage: CacheUsage): Record<string, unknown> {
  const choice = { index: 0, text, logprobs: null, finish_reason: finishReason === 'tool_calls' ? 'stop' : finishReason };
  return { ...openAiHead(base, 'text_completion'), choices: [choice], usage: openAiUsage(usage) };
}

export function openAiCompletionChunk(base: ChunkBase, text: string, finishReason: FinishReason | null): Record<string, unknown> {
  return { ...openAiHead(base, 'text_completion'), choices: [{ index: 0, text, logprobs: null, finish_reason: finishReason }] };
}
