/**
 * Runs llama.cpp's tokenizer (node-llama-cpp) in a plain child process; see
 * llamacpp-tokenize.mjs for why it cannot run inside a vitest worker.
 */
import { runLlamaChild } from './llamacpp-child-run.ts';

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
): LlamaCppTokenizeResult {
  return llamaCppTokenizeMany([{ modelPath, items, vocabOnly: options.vocabOnly }])[0];
}

/** Several files' tokenizations from one helper process. */
export function llamaCppTokenizeMany(requests: Array<{ modelPath: string; items: Array<{ text: string; parseSpecial: boolean }>; vocabOnly?: boolean }>): LlamaCppTokenizeResult[] {
  return runLlamaChild<LlamaCppTokenizeResult>('llamacpp-tokenize.mjs', requests.map((r) => ({ modelPath: r.modelPath, items: r.items, vocabOnly: r.vocabOnly ?? true })), 120_000);
}
