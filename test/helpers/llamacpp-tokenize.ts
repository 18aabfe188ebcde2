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
  return llamaCppTokenizeMany([{ modelPath, items, vocabOnly: options.vocabOnly }])[0];
}

/** Several files' tokenizations from one helper process (llama.cpp's start, ~3 s of CPU, paid once). */
export function llamaCppTokenizeMany(requests: Array<{ modelPath: string; items: Array<{ text: string; parseSpecial: boolean }>; vocabOnly?: boolean }>): LlamaCppTokenizeResult[] {
  const many = requests.map((r) => ({ modelPath: r.modelPath, items: r.items, vocabOnly: r.vocabOnly ?? true }));
  const r = spawnSync(process.execPath, [SCRIPT], {
    input: JSON.stringify({ many }),
    encoding: 'utf8',
    maxBuffer: 1 << 30,
    timeout: 120_000 * requests.length,
  });
  let res: { error?: string; many?: LlamaCppTokenizeResult[] };
  try {
    res = JSON.parse(r.stdout);
  } catch {
    throw new Error(`llama.cpp tokenize helper failed (status ${r.status}): ${r.stderr || r.stdout}`);
  }
  if (res.error) throw new Error(`llama.cpp: ${res.error}`);
  return res.many!;
}
