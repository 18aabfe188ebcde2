/** llama.cpp's reading of a GGUF vocabulary (EOG set, token attributes); see llamacpp-vocab-info.mjs. */
import { runLlamaChild } from './llamacpp-child-run.ts';

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

/** Several vocabularies' infos from one helper process. */
export function llamaCppVocabInfoMany(requests: LlamaCppVocabInfoRequest[]): LlamaCppVocabInfo[] {
  const many = requests.map((r) => ({ modelPath: r.modelPath, detokenize: r.detokenize ?? [], tokenize: r.tokenize?.items ?? [], detokenizeFirst: r.tokenize?.detokenizeFirst ?? 0 }));
  return runLlamaChild<LlamaCppVocabInfo>('llamacpp-vocab-info.mjs', many, 200_000);
}
