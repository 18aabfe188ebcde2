/** llama.cpp's tokenizer (llamacpp-tokenize.mjs), answered by this test process's llama.cpp server. */
import { llamaCall } from './llamacpp-server.ts';

export interface LlamaCppTokenizeResult {
  tokens: number[][];
  /** Wall time of the tokenize calls alone (model load excluded). */
  tokenizeMs: number;
  trainContextSize: number;
}

export function llamaCppTokenize(
  modelPath: string,
  items: Array<{ text: string; parseSpecial: boolean }>,
  options: { vocabOnly?: boolean } = {},
): Promise<LlamaCppTokenizeResult> {
  return llamaCall<LlamaCppTokenizeResult>('tokenize', { modelPath, items, vocabOnly: options.vocabOnly ?? true }, 120_000);
}

/** Several files' tokenizations, in order. */
export function llamaCppTokenizeMany(requests: Array<{ modelPath: string; items: Array<{ text: string; parseSpecial: boolean }>; vocabOnly?: boolean }>): Promise<LlamaCppTokenizeResult[]> {
  return Promise.all(requests.map((r) => llamaCppTokenize(r.modelPath, r.items, { vocabOnly: r.vocabOnly })));
}
