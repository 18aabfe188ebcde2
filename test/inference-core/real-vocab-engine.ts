/**
 * What the real-vocabulary engine tests (gemma3-, gptoss-real-vocab) share: a synthetic model with
 * an imported vocabulary loaded for the file's tests, and its ids checked against llama.cpp's and
 * Hugging Face tokenizers'.
 */
import { Tokenizer as HfTokenizer } from '@huggingface/tokenizers';
import { afterAll, beforeAll, expect } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { llamaCppTokenize } from '../helpers/llamacpp-tokenize.ts';
import { readRealVocab, type RealVocabName } from '../helpers/real-vocab-gguf.ts';

/** The model `ensure()` writes, loaded (one thread, 16 MiB pool) before the file's tests and handed to `loaded`; destroyed after them. */
export function realVocabEngineForSuite(ensure: () => string, loaded: (file: string, engine: LoadedEngine) => void): void {
  let engine: LoadedEngine | undefined;
  beforeAll(async () => {
    const file = ensure();
    engine = await loadEngine(file, { threads: 1, poolBytes: 16 * 2 ** 20 });
    loaded(file, engine);
  }, 300_000);
  afterAll(() => engine?.destroy());
}

/**
 * Each text's ids, special tokens parsed: kvtier's == llama.cpp's on the same GGUF (the whole file
 * loaded, so llama.cpp accepts every tensor) == Hugging Face tokenizers' on `vocab`'s
 * tokenizer.json, and decode gives the text back. Returns llama.cpp's ids.
 */
export async function expectIdsAgree(file: string, engine: LoadedEngine, vocab: RealVocabName, texts: string[]): Promise<number[][]> {
  const { tokenizerJson, tokenizerConfig } = readRealVocab(vocab);
  const hf = new HfTokenizer(tokenizerJson, tokenizerConfig);
  const ref = (await llamaCppTokenize(file, texts.map((text) => ({ text, parseSpecial: true })), { vocabOnly: false })).tokens;
  texts.forEach((text, i) => {
    const ours = Array.from(engine.tokenizer.encode(text, { addSpecial: false, parseSpecial: true }));
    expect(ours, text).toEqual(ref[i]);
    expect(hf.encode(text, { add_special_tokens: false }).ids, text).toEqual(ours);
    expect(engine.tokenizer.decode(ours, { renderSpecial: true })).toBe(text);
  });
  return ref;
}
