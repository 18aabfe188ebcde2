/**
 * What a Tokenizer is built from (the vocabulary and its rules) and the
 * options of its encode/decode calls; `tokenizerSpecFromGguf` reads the spec
 * from a GGUF file's metadata.
 */
import type { GgufFile } from '../gguf/index.ts';
import { stripAttributesByModelName } from './llama-vocab-rules.ts';
import { isPreTokenizerName, type PreTokenizerName } from './pre-tokenizer.ts';
import { TokenizerError } from './tokenizer-errors.ts';

export type TokenizerModelName = 'gpt2' | 'llama';

export interface EncodeOptions {
  /** Add BOS/EOS as the vocabulary asks (tokenizer.ggml.add_bos_token / add_eos_token). Default true. */
  addSpecial?: boolean;
  /** Match control tokens written in the text (e.g. "<|im_start|>") as single specials. Default false. */
  parseSpecial?: boolean;
}

export interface DecodeOptions {
  /** Render control tokens' text (default false: they decode to nothing). */
  renderSpecial?: boolean;
  /** SPM: drop the space the tokenizer put in front of the text: one leading space of the first token's piece (default false). */
  stripLeadingSpace?: boolean;
  /**
   * llama_detokenize's clean-up of spaces before punctuation and contractions (" ?" → "?", " 's" → "'s").
   * Lossy, so off by default; `Tokenizer.cleanSpaces` says whether llama.cpp applies it for this vocabulary.
   */
  cleanSpaces?: boolean;
}

export interface TokenizerSpec {
  model: TokenizerModelName;
  pre?: PreTokenizerName;
  tokens: string[];
  tokenTypes?: Int32Array;
  scores?: Float32Array;
  merges?: string[];
  bosId?: number;
  eosId?: number;
  eotId?: number;
  padId?: number;
  unkId?: number;
  addBos?: boolean;
  addEos?: boolean;
  addSpacePrefix?: boolean;
  /**
   * Specials that swallow ASCII whitespace on their left (lstrip) or right (rstrip) when matched
   * in text. GGUF has no field for these: llama.cpp sets them from the model name (see fromGguf).
   */
  strip?: ReadonlyMap<number, { lstrip: boolean; rstrip: boolean }>;
}

/** The tokenizer's spec from a GGUF file's tokenizer.ggml.* metadata (and llama.cpp's name-based strip rules). */
export function tokenizerSpecFromGguf(gguf: GgufFile): TokenizerSpec {
  const model = gguf.getString('tokenizer.ggml.model');
  if (model !== 'gpt2' && model !== 'llama') {
    throw new TokenizerError('KVT_ERR_TOKENIZER_UNSUPPORTED_MODEL', `${gguf.path}: tokenizer.ggml.model "${model}" is not supported (gpt2 and llama are)`);
  }
  let pre: PreTokenizerName | undefined;
  if (model === 'gpt2') {
    const name = gguf.optString('tokenizer.ggml.pre') ?? 'default';
    const aliases: Record<string, PreTokenizerName> = { 'llama-bpe': 'llama-bpe', llama3: 'llama-bpe', 'llama-v3': 'llama-bpe', qwen2: 'qwen2', 'deepseek-v3': 'deepseek-v3', 'gpt-4o': 'gpt-4o' };
    pre = aliases[name];
    if (!pre || !isPreTokenizerName(pre)) {
      throw new TokenizerError('KVT_ERR_TOKENIZER_UNSUPPORTED_PRE', `${gguf.path}: tokenizer.ggml.pre "${name}" is not supported (llama-bpe, qwen2, deepseek-v3, gpt-4o are)`);
    }
  }
  const opt = (k: string) => gguf.optU32(`tokenizer.ggml.${k}`);
  const tokens = gguf.getStringArray('tokenizer.ggml.tokens');
  const tokenTypes = gguf.optI32Array('tokenizer.ggml.token_type');
  return {
    model,
    pre,
    tokens,
    tokenTypes,
    scores: gguf.optF32Array('tokenizer.ggml.scores'),
    merges: gguf.optStringArray('tokenizer.ggml.merges'),
    bosId: opt('bos_token_id'),
    eosId: opt('eos_token_id'),
    eotId: opt('eot_token_id'),
    padId: opt('padding_token_id'),
    unkId: opt('unknown_token_id'),
    addBos: gguf.optBool('tokenizer.ggml.add_bos_token'),
    addEos: gguf.optBool('tokenizer.ggml.add_eos_token'),
    addSpacePrefix: gguf.optBool('tokenizer.ggml.add_space_prefix'),
    strip: stripAttributesByModelName(gguf.optString('general.name') ?? '', tokens, tokenTypes),
  };
}
