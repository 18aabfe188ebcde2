/**
 * The PromptCodec of a GGUF model: inference-core's tokenizer and chat
 * template, read from the file's metadata (no weights are loaded, so the API
 * process can tokenize while the engine runs in a worker).
 */
import { ChatTemplate, readGguf, Tokenizer, type ChatMessage as CoreChatMessage } from '../../inference-core/index.ts';
import type { ChatMessage, PromptCodec, RenderChatOptions } from './types.ts';
import { KvtError } from '../errors.ts';

export function promptCodecFromGgufFile(path: string): PromptCodec {
  const gguf = readGguf(path, { rejectUnsupportedTypes: false });
  try {
    const tokenizer = Tokenizer.fromGguf(gguf);
    let template: ChatTemplate | null = null;
    try {
      template = ChatTemplate.fromGguf(gguf);
    } catch (error) {
      if ((error as { code?: string }).code !== 'KVT_ERR_TEMPLATE_MISSING') throw error;
    }
    return promptCodecFrom(tokenizer, template);
  } finally {
    gguf.close();
  }
}

export function promptCodecFrom(tokenizer: Tokenizer, template: ChatTemplate | null): PromptCodec {
  const bosTokenId = tokenizer.addBos && tokenizer.bosId !== undefined ? tokenizer.bosId : null;
  // harmony (gpt-oss): a template that opens replies with <|start|>assistant and writes channels, and a vocabulary with <|call|>
  const callTokenId = tokenizer.tokenId('<|call|>');
  const harmony = template !== null && template.source.includes('<|start|>assistant') && template.source.includes('<|channel|>') && callTokenId !== undefined && tokenizer.isEog(callTokenId) ? { callTokenId } : undefined;
  return {
    ...(harmony ? { harmony } : {}),
    encode: (text) => tokenizer.encode(text, { addSpecial: false, parseSpecial: true }),
    decode: (ids) => tokenizer.decode(ids),
    createDetokenizer: () => tokenizer.createDetokenizer(),
    renderChat(messages: readonly ChatMessage[], options: RenderChatOptions): string {
      if (!template) throw missingTemplate();
      // An empty transcript may not render in every template (messages[0] is read); it is then the empty text.
      if (messages.length === 0 && !options.addGenerationPrompt) {
        try {
          return template.render({ messages: [], tools: options.tools ? [...options.tools] : undefined, addGenerationPrompt: false, extra: extraOf(options) });
        } catch {
          return '';
        }
      }
      return template.render({
        messages: messages as CoreChatMessage[],
        tools: options.tools ? [...options.tools] : undefined,
        addGenerationPrompt: options.addGenerationPrompt,
        extra: extraOf(options),
      });
    },
    renderChatSegmented(messages: readonly ChatMessage[], options: RenderChatOptions) {
      if (!template) throw missingTemplate();
      return template.renderWithMessageStarts({
        messages: messages as CoreChatMessage[],
        tools: options.tools ? [...options.tools] : undefined,
        addGenerationPrompt: options.addGenerationPrompt,
        extra: extraOf(options),
      });
    },
    stopTokenIds: [...tokenizer.eogIds],
    bosTokenId,
    bosText: bosTokenId === null ? null : tokenizer.tokenText(bosTokenId),
    vocabSize: tokenizer.vocabSize,
    maxTokenChars: longestPiece(tokenizer),
  };
}

/** The request's template kwargs; the variables the renderer sets itself (messages, tools, add_generation_prompt…) win. */
function extraOf(options: RenderChatOptions): Record<string, unknown> | undefined {
  if (!options.templateKwargs) return undefined;
  // Special-token variables (bos_token, eos_token…) come from the model, never from a request.
  return Object.fromEntries(Object.entries(options.templateKwargs).filter(([key]) => !key.endsWith('_token')));
}

function missingTemplate(): KvtError {
  return new KvtError('KVT_ERR_TEMPLATE_MISSING', 'this model has no chat template (tokenizer.chat_template); use /v1/completions');
}

/**
 * A piece's text is at least as long as what it decodes to: byte-level BPE
 * spells each byte as one character, SPM's ▁ is one space, a byte-fallback
 * piece <0xAB> is one byte.
 */
function longestPiece(tokenizer: Tokenizer): number {
  let longest = 1;
  for (let id = 0; id < tokenizer.vocabSize; id++) longest = Math.max(longest, tokenizer.tokenText(id).length);
  return longest;
}
