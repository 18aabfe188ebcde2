/**
 * Deterministic BPE trainers for the synthetic models' vocabularies.
 *
 * Byte-level (gpt2-style): words come from the chosen pre-tokenizer; each
 * word starts as its UTF-8 bytes; the most frequent adjacent pair is merged
 * until the vocabulary is full. Ties break on the smaller (left id, right id)
 * so the result depends only on the corpus.
 *
 * SentencePiece-style (llama-style): spaces become '▁' and start a piece;
 * symbols are code points; frequent code points are base pieces, the rest are
 * left to byte fallback. Merged pieces get score −rank so llama.cpp's
 * score-ordered merging replays the training order.
 *
 * Pair counts are kept incrementally (pair → count, pair → words that hold
 * it) with a lazy max-heap, so a merge touches only the words containing it.
 */
import { BYTE_TO_UNICODE } from './byte-unicode.ts';
import { preTokenize, type PreTokenizerName } from './pre-tokenizer.ts';

interface Word {
  symbols: number[];
  count: number;
}

class MaxHeap {
  // entries: [count, left, right]; larger count first, then smaller left, then smaller right.
  private readonly items: Array<[number, number, number]> = [];
  private better(a: [number, number, number], b: [number, number, number]): boolean {
    return a[0] !== b[0] ? a[0] > b[0] : a[1] !== b[1] ? a[1] < b[1] : a[2] < b[2];
  }
  push(x: [number, number, number]): void {
    const h = this.items;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.better(h[i], h[p])) break;
      [h[i], h[p]] = [h[p], h[i]];
      i = p;
    }
  }
  pop(): [number, number, number] | undefined {
    const h = this.items;
    if (h.length === 0) return undefined;
    const top = h[0];
    const last = h.pop()!;
    if (h.length > 0) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.better(h[l], h[m])) m = l;
        if (r < h.length && this.better(h[r], h[m])) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m], h[i]];
        i = m;
      }
    }
    return top;
  }
}

const PAIR_SHIFT = 2 ** 20;
const pairKey = (a: number, b: number) => a * PAIR_SHIFT + b;

interface MergeResult {
  /** Merges in rank order, as (left symbol id, right symbol id, new id). */
  merges: Array<[number, number, number]>;
  /** Symbol strings by id (base symbols first, then merged ones). */
  symbols: string[];
}

/** Core loop shared by both trainers: merge until `symbols.length` reaches `targetSymbols`. */
function trainMerges(words: Word[], baseSymbols: string[], targetSymbols: number, minCount = 2): MergeResult {
  const symbols = [...baseSymbols];
  const bySymbol = new Map(symbols.map((s, i) => [s, i]));
  const pairCounts = new Map<number, number>();
  const pairWords = new Map<number, Set<number>>();
  const heap = new MaxHeap();

  const addWordPairs = (wi: number, sign: 1 | -1) => {
    const w = words[wi];
    const s = w.symbols;
    for (let i = 0; i + 1 < s.length; i++) {
      const k = pairKey(s[i], s[i + 1]);
      pairCounts.set(k, (pairCounts.get(k) ?? 0) + sign * w.count);
      if (sign > 0) {
        let set = pairWords.get(k);
        if (!set) pairWords.set(k, (set = new Set()));
        set.add(wi);
      }
    }
  };
  for (let wi = 0; wi < words.length; wi++) addWordPairs(wi, 1);
  for (const [k, c] of pairCounts) heap.push([c, Math.floor(k / PAIR_SHIFT), k % PAIR_SHIFT]);

  const merges: Array<[number, number, number]> = [];
  while (symbols.length < targetSymbols) {
    const top = heap.pop();
    if (!top) break;
    const [count, a, b] = top;
    const k = pairKey(a, b);
    if ((pairCounts.get(k) ?? 0) !== count) continue; // stale heap entry
    if (count < minCount) break;
    const text = symbols[a] + symbols[b];
    let id = bySymbol.get(text);
    if (id === undefined) {
      id = symbols.length;
      symbols.push(text);
      bySymbol.set(text, id);
    }
    merges.push([a, b, id]);
    const affected = [...(pairWords.get(k) ?? [])].sort((x, y) => x - y);
    const touched = new Set<number>();
    for (const wi of affected) {
      const w = words[wi];
      addWordPairs(wi, -1);
      for (let i = 0; i + 1 < w.symbols.length; i++) touched.add(pairKey(w.symbols[i], w.symbols[i + 1]));
      const next: number[] = [];
      for (let i = 0; i < w.symbols.length; i++) {
        if (i + 1 < w.symbols.length && w.symbols[i] === a && w.symbols[i + 1] === b) {
          next.push(id);
          i++;
        } else next.push(w.symbols[i]);
      }
      w.symbols = next;
      addWordPairs(wi, 1);
      for (let i = 0; i + 1 < w.symbols.length; i++) touched.add(pairKey(w.symbols[i], w.symbols[i + 1]));
    }
    pairCounts.delete(k);
    pairWords.delete(k);
    for (const t of touched) {
      const c = pairCounts.get(t);
      if (c === undefined) continue;
      if (c <= 0) {
        pairCounts.delete(t);
        pairWords.delete(t);
        continue;
      }
      heap.push([c, Math.floor(t / PAIR_SHIFT), t % PAIR_SHIFT]);
    }
  }
  return { merges, symbols };
}

export interface ByteLevelVocab {
  /** Byte-level token strings: 256 byte tokens (in byte order), then merged tokens. */
  tokens: string[];
  /** "left right" strings in rank order. */
  merges: string[];
}

/** Trains a byte-level BPE vocabulary of `vocabSize` tokens (special tokens not included). */
export function trainByteLevelBpe(texts: string[], vocabSize: number, pre: PreTokenizerName): ByteLevelVocab {
  const counts = new Map<string, number>();
  for (const text of texts) for (const w of preTokenize(text, pre)) counts.set(w, (counts.get(w) ?? 0) + 1);
  const enc = new TextEncoder();
  const words: Word[] = [...counts.entries()]
    .sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))
    .map(([w, count]) => ({ symbols: Array.from(enc.encode(w)), count }));
  const { merges, symbols } = trainMerges(words, [...BYTE_TO_UNICODE], vocabSize, 1);
  return { tokens: symbols, merges: merges.map(([a, b]) => `${symbols[a]} ${symbols[b]}`) };
}

export interface SpmVocab {
  /** Pieces with '▁' for space: merged pieces in rank order, then base code points by frequency. */
  pieces: string[];
  scores: number[];
}

/**
 * Trains a SentencePiece-style BPE vocabulary of `pieceCount` pieces (the
 * caller adds <unk>, <s>, </s> and the 256 byte-fallback tokens).
 */
export function trainSpmBpe(texts: string[], pieceCount: number, minCharCount = 3): SpmVocab {
  const counts = new Map<string, number>();
  const charCounts = new Map<string, number>();
  for (const text of texts) {
    const escaped = ('▁' + text).replace(/ /g, '▁');
    for (const m of escaped.matchAll(/▁*[^▁\n]+|▁+|\n+/gu)) {
      counts.set(m[0], (counts.get(m[0]) ?? 0) + 1);
      for (const ch of m[0]) charCounts.set(ch, (charCounts.get(ch) ?? 0) + 1);
    }
  }
  // Control characters and rare code points stay out of the vocabulary: byte fallback covers them.
  const base = [...charCounts.entries()]
    .filter(([ch, c]) => c >= minCharCount && ch.codePointAt(0)! >= 0x20)
    .sort((x, y) => y[1] - x[1] || (x[0] < y[0] ? -1 : 1))
    .map(([ch]) => ch);
  const baseId = new Map(base.map((ch, i) => [ch, i]));
  const words: Word[] = [];
  for (const [w, count] of [...counts.entries()].sort((x, y) => (x[0] < y[0] ? -1 : x[0] > y[0] ? 1 : 0))) {
    // A word is split at code points that are not base pieces: those never merge.
    let run: number[] = [];
    for (const ch of w) {
      const id = baseId.get(ch);
      if (id === undefined) {
        if (run.length > 1) words.push({ symbols: run, count });
        run = [];
      } else run.push(id);
    }
    if (run.length > 1) words.push({ symbols: run, count });
  }
  const targetMerged = Math.max(0, pieceCount - base.length);
  const { merges, symbols } = trainMerges(words, base, base.length + targetMerged);
  const mergedPieces: string[] = [];
  const seen = new Set<string>();
  for (const [, , id] of merges) {
    const s = symbols[id];
    if (!seen.has(s)) {
      seen.add(s);
      mergedPieces.push(s);
    }
  }
  const pieces = [...mergedPieces, ...base];
  const scores = pieces.map((_, i) => -i);
  return { pieces, scores };
}
