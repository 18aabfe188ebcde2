/**
 * Runs llama.cpp's tokenizer (node-llama-cpp) in a plain child process; see
 * llamacpp-tokenize.mjs for why it cannot run inside a vitest worker.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'llamacpp-tokenize.mjs');

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
  const r = spawnSync(process.execPath, [SCRIPT], {
    input: JSON.stringify({ modelPath, items, vocabOnly: options.vocabOnly ?? true }),
    encoding: 'utf8',
    maxBuffer: 256 << 20,
    timeout: 120_000,
  });
  let res: { error?: string } & LlamaCppTokenizeResult;
  try {
    res = JSON.parse(r.stdout);
  } catch {
    throw new Error(`llama.cpp tokenize helper failed (status ${r.status}): ${r.stderr || r.stdout}`);
  }
  if (res.error) throw new Error(`llama.cpp: ${res.error}`);
  return res;
}
