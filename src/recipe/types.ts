/**
 * The recipe's own shapes: one chat transcript format that both APIs (OpenAI
 * chat completions, Anthropic messages) are turned into before the model's
 * chat template renders it. It is the HF chat-template convention, so a GGUF
 * model's own template (tokenizer.chat_template) can render it unchanged.
 */

export type ChatRole = 'system' | 'user' | 'assistant' | 'tool';

export interface ToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: Record<string, unknown> | string };
  /** The arguments as the client's JSON text (OpenAI), kept for templates that use arguments as text (DeepSeek V3). */
  rawArguments?: string;
}

export interface ChatMessage {
  role: ChatRole;
  /**
   * null: an assistant turn that only calls tools (OpenAI's `content: null`, an
   * Anthropic turn of tool_use blocks). The template gets null where it tests
   * for it, "" elsewhere (inference-core chat-template-conventions.ts).
   */
  content: string | null;
  tool_calls?: ToolCall[];
  /** role 'tool': the call this result answers. */
  tool_call_id?: string;
  /** role 'tool': the tool's name, when the client gave it. */
  name?: string;
  /**
   * role 'assistant': the turn's reasoning, when the client sends it back
   * (DeepSeek's reasoning_content, an Anthropic thinking block, a Responses
   * reasoning item). The template decides: Qwen3's re-renders it inside the
   * current tool loop and drops it before, templates that never read it ignore it.
   */
  reasoning_content?: string;
}

export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface RenderChatOptions {
  tools?: readonly ToolSpec[];
  addGenerationPrompt: boolean;
  /** Extra template variables (the request's chat_template_kwargs, e.g. enable_thinking). */
  templateKwargs?: Readonly<Record<string, unknown>>;
}

/**
 * What the recipe needs from the model: a tokenizer and its chat template.
 * inference-core's engine tokenizer + template provide it (see
 * `promptCodecFromEngine`).
 */
export interface PromptCodec {
  /** Text → ids; special-token text (e.g. `<|im_end|>`) becomes the special id. No BOS is added. */
  encode(text: string): Uint32Array;
  decode(ids: ArrayLike<number>): string;
  /** Streaming detokenizer: text as soon as it is complete UTF-8; control tokens decode to nothing. */
  createDetokenizer(): { push(id: number): string; flush(): string };
  /** The model's chat template over `messages`. */
  renderChat(messages: readonly ChatMessage[], options: RenderChatOptions): string;
  /** `renderChat` plus where each message's output begins (-1: not visited by the transcript loop), or null when the template cannot say. */
  renderChatSegmented(messages: readonly ChatMessage[], options: RenderChatOptions): { text: string; starts: number[] } | null;
  /** Ids that end a reply (EOS, end of turn). */
  readonly stopTokenIds: readonly number[];
  /** The BOS id the model expects first, or null. Prepended once unless the template emits it. */
  readonly bosTokenId: number | null;
  readonly bosText: string | null;
  readonly vocabSize: number;
  /**
   * The most UTF-16 code units one token can stand for (its longest piece).
   * A text of c units is at least ceil(c / maxTokenChars) tokens: a prompt
   * too long for the context is refused from its length, before tokenizing.
   */
  readonly maxTokenChars: number;
  /** Present when the template is harmony (gpt-oss): replies split by channel, forced tool calls as commentary messages ending on <|call|>. */
  readonly harmony?: { readonly callTokenId: number };
}

/** Sampling fields shared by every API, already validated: the request spec's own (src/request-spec.ts). */
export type { SamplingSpec } from '../request-spec.ts';

export type FinishReason = 'stop' | 'length' | 'tool_calls';

/** What the cache did for one request, in tokens. */
export interface CacheUsage {
  promptTokens: number;
  /** Prompt tokens whose KV came from the cache (whole blocks). */
  cachedTokens: number;
  /** Prompt tokens prefilled by this request. */
  computedTokens: number;
  /** Prompt tokens newly written to the cache by this request (whole blocks; Anthropic's cache_creation_input_tokens). */
  storedPromptTokens: number;
  completionTokens: number;
}
