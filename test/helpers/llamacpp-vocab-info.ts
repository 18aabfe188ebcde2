/** llama.cpp's reading of a GGUF vocabulary (EOG set, token attributes; llamacpp-vocab-info.mjs), answered by this test process's llama.cpp server. */
import { llamaCall } from './llamacpp-server.ts';

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
): Promise<LlamaCppVocabInfo> {
  return llamaCall<LlamaCppVocabInfo>('vocab-info', { modelPath, detokenize, tokenize: tokenize.items, detokenizeFirst: tokenize.detokenizeFirst ?? 0 }, 200_000);
}

/** Several vocabularies' infos, in order. */
export function llamaCppVocabInfoMany(requests: LlamaCppVocabInfoRequest[]): Promise<LlamaCppVocabInfo[]> {
  return Promise.all(requests.map((r) => llamaCppVocabInfo(r.modelPath, r.detokenize ?? [], r.tokenize ?? { items: [] })));
}
