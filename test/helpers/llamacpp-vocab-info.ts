/** llama.cpp's reading of a GGUF vocabulary (EOG set, token attributes); see llamacpp-vocab-info.mjs. */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';

const SCRIPT = path.join(path.dirname(fileURLToPath(import.meta.url)), 'llamacpp-vocab-info.mjs');

export interface LlamaCppVocabInfo {
  eogIds: number[];
  controlIds: number[];
  userDefinedIds: number[];
  lstripIds: number[];
  rstripIds: number[];
  /** llama_detokenize of each requested token list, then of the first `detokenizeFirst` tokenized lists (plain, then special). */
  texts: string[];
  /** llama.cpp's ids of each `tokenize` item. */
  tokens: number[][];
  bos: number | null;
  eos: number | null;
  eot: number | null;
}

export interface LlamaCppVocabInfoRequest {
  modelPath: string;
  detokenize?: Array<{ tokens: number[]; special: boolean }>;
  tokenize?: { items: Array<{ text: string; parseSpecial: boolean }>; detokenizeFirst?: number };
}

export function llamaCppVocabInfo(
  modelPath: string,
  detokenize: Array<{ tokens: number[]; special: boolean }> = [],
  tokenize: { items: Array<{ text: string; parseSpecial: boolean }>; detokenizeFirst?: number } = { items: [] },
): LlamaCppVocabInfo {
  return llamaCppVocabInfoMany([{ modelPath, detokenize, tokenize }])[0];
}

/** Several vocabularies' infos from one helper process (llama.cpp's start, ~3 s of CPU, paid once). */
export function llamaCppVocabInfoMany(requests: LlamaCppVocabInfoRequest[]): LlamaCppVocabInfo[] {
  const many = requests.map((r) => ({ modelPath: r.modelPath, detokenize: r.detokenize ?? [], tokenize: r.tokenize?.items ?? [], detokenizeFirst: r.tokenize?.detokenizeFirst ?? 0 }));
  const r = spawnSync(process.execPath, [SCRIPT], { input: JSON.stringify({ many }), encoding: 'utf8', maxBuffer: 1 << 30, timeout: 200_000 * requests.length });
  let res: { error?: string; many?: LlamaCppVocabInfo[] };
  try {
    res = JSON.parse(r.stdout);
  } catch {
    throw new Error(`llama.cpp vocab-info helper failed (status ${r.status}): ${r.stderr || r.stdout}`);
  }
  if (res.error) throw new Error(`llama.cpp: ${res.error}`);
  return res.many!;
}
