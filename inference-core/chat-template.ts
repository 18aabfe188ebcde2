/**
 * Chat templates: renders `tokenizer.chat_template` (Jinja) with
 * @huggingface/jinja, the same engine Hugging Face uses, so real models'
 * templates work as their authors wrote them.
 *
 * CHATML_TEMPLATE is what the synthetic models ship. It is prefix-stable:
 *
 *   render(msgs, gen=true) + reply + "<|im_end|>"   is a prefix of
 *   render(msgs + [{assistant, reply}] + next, …)
 *
 * including assistant turns that are tool calls (rendered exactly as the
 * model would write them after "<|im_start|>assistant\n") and tool results,
 * so a multi-turn conversation or an agent loop re-uses every earlier block
 * of its KV cache.
 */
import { Template } from '@huggingface/jinja';
import type { GgufFile } from './gguf/index.ts';
import { applyConventions, templateConventions, type TemplateConventions } from './chat-template-conventions.ts';
import { rewriteForPythonPrinting } from './chat-template-jinja2-compat.ts';
import { markLoopControls } from './chat-template-loop-controls.ts';
import { containsMarkerChars, renderSegmented, type SegmentedRender } from './chat-template-segments.ts';

export interface ToolCall {
  id?: string;
  type?: 'function';
  function: { name: string; arguments: string | Record<string, unknown> };
  /**
   * The arguments exactly as the client sent them (OpenAI's JSON string), when
   * `arguments` holds them parsed: a template that uses arguments as text gets
   * these bytes. Never reaches the template as a key.
   */
  rawArguments?: string;
}

export interface ChatMessage {
  role: 'system' | 'user' | 'assistant' | 'tool';
  /** null: an assistant turn that only calls tools; the template gets null or "" as it expects (chat-template-conventions.ts). */
  content: string | null | Array<{ type: 'text'; text: string }>;
  tool_calls?: ToolCall[];
  tool_call_id?: string;
  name?: string;
}

export interface ToolSpec {
  type: 'function';
  function: { name: string; description?: string; parameters?: Record<string, unknown> };
}

export interface RenderOptions {
  messages: ChatMessage[];
  tools?: ToolSpec[];
  addGenerationPrompt?: boolean;
  /** Extra template variables (e.g. enable_thinking). */
  extra?: Record<string, unknown>;
}

export class ChatTemplateError extends Error {
  override readonly name = 'ChatTemplateError';
  constructor(
    readonly code: 'KVT_ERR_TEMPLATE_MISSING' | 'KVT_ERR_TEMPLATE_PARSE' | 'KVT_ERR_TEMPLATE_RENDER',
    message: string,
  ) {
    super(`${code}: ${message}`);
  }
}

export const CHATML_END_OF_TURN = '<|im_end|>';

export const CHATML_TEMPLATE = [
  "{%- if tools %}",
  "{{- '<|im_start|>system\\n' }}",
  "{%- if messages[0].role == 'system' %}{{- messages[0].content + '\\n\\n' }}{%- endif %}",
  "{{- '# Tools\\n\\nYou may call one or more functions to assist with the user query.\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>' }}",
  "{%- for tool in tools %}{{- '\\n' }}{{- tool | tojson }}{%- endfor %}",
  "{{- '\\n</tools>\\n\\nFor each function call, return a json object with function name and arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\"name\": <function-name>, \"arguments\": <args-json-object>}\\n</tool_call><|im_end|>\\n' }}",
  "{%- elif messages[0].role == 'system' %}",
  "{{- '<|im_start|>system\\n' + messages[0].content + '<|im_end|>\\n' }}",
  "{%- endif %}",
  "{%- for message in messages %}",
  "{%- if message.role == 'system' and loop.first %}",
  "{%- elif message.role == 'assistant' %}",
  "{{- '<|im_start|>assistant\\n' }}",
  "{%- if message.content %}{{- message.content }}{%- endif %}",
  "{%- if message.tool_calls %}",
  "{%- for tool_call in message.tool_calls %}",
  "{%- if tool_call.function is defined %}{%- set tool_call = tool_call.function %}{%- endif %}",
  "{%- if message.content or not loop.first %}{{- '\\n' }}{%- endif %}",
  "{{- '<tool_call>\\n{\"name\": \"' + tool_call.name + '\", \"arguments\": ' }}",
  "{%- if tool_call.arguments is string %}{{- tool_call.arguments }}{%- else %}{{- tool_call.arguments | tojson }}{%- endif %}",
  "{{- '}\\n</tool_call>' }}",
  "{%- endfor %}",
  "{%- endif %}",
  "{{- '<|im_end|>\\n' }}",
  "{%- elif message.role == 'tool' %}",
  "{{- '<|im_start|>tool\\n<tool_response>\\n' + message.content + '\\n</tool_response><|im_end|>\\n' }}",
  "{%- else %}",
  "{{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>\\n' }}",
  "{%- endif %}",
  "{%- endfor %}",
  "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}",
].join('');

function flattenContent(m: ChatMessage): ChatMessage {
  if (Array.isArray(m.content)) return { ...m, content: m.content.map((p) => p.text).join('') };
  return m;
}

/** Special tokens' texts: transformers hands a template its tokenizer's special_tokens_map. */
export interface TemplateSpecialTokens {
  bosToken?: string;
  eosToken?: string;
  unkToken?: string;
  padToken?: string;
}

/** Named templates a tokenizer ships beside its default one (tokenizer_config's chat_template list; GGUF tokenizer.chat_template.<name>). */
export interface TemplateVariants {
  /** Rendered instead of the default when the request has tools, as transformers picks it. */
  toolUse?: string;
}

export class ChatTemplate {
  private readonly template: Template;
  /** How this template reads content and tool-call arguments. */
  readonly conventions: TemplateConventions;
  /** The `tool_use` template, or null: requests with tools render with it. */
  readonly toolUse: ChatTemplate | null;

  constructor(
    readonly source: string,
    readonly specialTokens: TemplateSpecialTokens = {},
    variants: TemplateVariants = {},
  ) {
    this.toolUse = variants.toolUse !== undefined ? new ChatTemplate(variants.toolUse, specialTokens) : null;
    try {
      this.template = new Template(source);
      // Printed values as jinja2 prints them (True, None, ['a']): see chat-template-jinja2-compat.ts.
      rewriteForPythonPrinting((this.template as unknown as { parsed: unknown }).parsed);
      // Text printed before a break/continue stays, as in jinja2: see chat-template-loop-controls.ts.
      markLoopControls((this.template as unknown as { parsed: unknown }).parsed);
    } catch (err) {
      throw new ChatTemplateError('KVT_ERR_TEMPLATE_PARSE', `chat template does not parse: ${(err as Error).message}`);
    }
    this.conventions = templateConventions(source);
  }

  /** The template from tokenizer.chat_template, with bos/eos token texts from the vocabulary. */
  static fromGguf(gguf: GgufFile): ChatTemplate {
    const source = gguf.optString('tokenizer.chat_template');
    if (source === undefined) {
      throw new ChatTemplateError('KVT_ERR_TEMPLATE_MISSING', `${gguf.path}: no tokenizer.chat_template; use the completions API or pass a template`);
    }
    const tokens = gguf.optStringArray('tokenizer.ggml.tokens');
    const text = (key: string): string | undefined => {
      const id = gguf.optU32(key);
      return tokens && id !== undefined ? tokens[id] : undefined;
    };
    // Named templates as convert_hf_to_gguf.py writes them: tokenizer.chat_templates lists the names.
    const names = gguf.optStringArray('tokenizer.chat_templates') ?? [];
    const toolUse = names.includes('tool_use') ? gguf.optString('tokenizer.chat_template.tool_use') : undefined;
    return new ChatTemplate(
      source,
      {
        bosToken: text('tokenizer.ggml.bos_token_id'),
        eosToken: text('tokenizer.ggml.eos_token_id'),
        unkToken: text('tokenizer.ggml.unknown_token_id'),
        padToken: text('tokenizer.ggml.padding_token_id'),
      },
      { toolUse },
    );
  }

  /** The template transformers would pick: `tool_use` when there are tools and the tokenizer has one. */
  private pick(options: RenderOptions): ChatTemplate {
    return this.toolUse !== null && options.tools !== undefined && options.tools.length > 0 ? this.toolUse : this;
  }

  render(options: RenderOptions): string {
    const picked = this.pick(options);
    if (picked !== this) return picked.render(options);
    try {
      return this.template.render(this.context(options, this.prepare(options.messages)));
    } catch (err) {
      throw new ChatTemplateError('KVT_ERR_TEMPLATE_RENDER', `chat template failed to render: ${(err as Error).message}`);
    }
  }

  /**
   * `render(options)` plus where each message's output begins (see
   * chat-template-segments.ts), or null when this template's output cannot be
   * attributed to messages.
   */
  renderWithMessageStarts(options: RenderOptions): SegmentedRender | null {
    const picked = this.pick(options);
    if (picked !== this) return picked.renderWithMessageStarts(options);
    const messages = this.prepare(options.messages);
    if (containsMarkerChars([messages, options.tools, options.extra])) return null;
    try {
      return renderSegmented(this.template, this.context(options, messages), messages.length);
    } catch (err) {
      throw new ChatTemplateError('KVT_ERR_TEMPLATE_RENDER', `chat template failed to render: ${(err as Error).message}`);
    }
  }

  private prepare(messages: ChatMessage[]): ChatMessage[] {
    return messages.map((m) => applyConventions(flattenContent(m), this.conventions));
  }

  /**
   * What transformers passes to render(): special tokens (the ones the
   * tokenizer has), extra kwargs, then messages, tools and documents as None
   * when absent (`tools is none` holds; `tools is defined` too), and
   * add_generation_prompt.
   */
  private context(options: RenderOptions, messages: ChatMessage[]): Record<string, unknown> {
    const { bosToken, eosToken, unkToken, padToken } = this.specialTokens;
    return {
      bos_token: bosToken ?? '',
      eos_token: eosToken ?? '',
      ...(unkToken !== undefined ? { unk_token: unkToken } : {}),
      ...(padToken !== undefined ? { pad_token: padToken } : {}),
      ...options.extra,
      messages,
      tools: options.tools && options.tools.length > 0 ? options.tools : null,
      documents: null,
      add_generation_prompt: options.addGenerationPrompt ?? false,
    };
  }
}
