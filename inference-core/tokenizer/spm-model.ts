/**
 * SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"), the
 * algorithm of llama.cpp's llm_tokenizer_spm: the text (spaces already
 * escaped to '▁') starts as one symbol per code point; repeatedly the
 * adjacent pair whose concatenation is a vocabulary piece with the highest
 * score (leftmost on ties) is merged. Each final symbol is emitted as its
 * piece, or as <0xNN> byte
 * tokens when nothing matches (byte fallback), or <unk>.
 *
 * Speed: when no piece contains a non-'▁' character followed by '▁' (true of
 * SentencePiece vocabularies trained with split_by_whitespace, Llama 2 and
 * Mistral among them), no merge can ever cross the point where a '▁' run
 * follows other text, so the text is cut there and each word is merged on its
 * own and cached — the same result as merging the whole text at once (merges
 * in different words are independent, and within a word they happen in the
 * same order), without one heap over the whole prompt.
 */
import { MergeQueue } from './min-heap.ts';

const enc = new TextEncoder();

const ID_SHIFT = 2 ** 21;

export class SpmModel {
  /** (left id, right id) → id of the concatenation, or -1 when it is not a piece. Grows with use. */
  private readonly pairCache = new Map<number, number>();

  constructor(
    private readonly tokenToId: ReadonlyMap<string, number>,
    private readonly scores: Float32Array,
    private readonly byteTokens: Int32Array,
    private readonly unkId: number | undefined,
  ) {
    this.cacheable = tokenToId.size < ID_SHIFT;
    let wordsIndependent = true;
    for (const piece of tokenToId.keys()) {
      if (/[^\u2581]\u2581/u.test(piece)) {
        wordsIndependent = false;
        break;
      }
    }
    this.wordsIndependent = wordsIndependent;
  }

  private readonly cacheable: boolean;
  private readonly wordsIndependent: boolean;
  private readonly wordCache = new Map<string, number[]>();
  private static readonly WORD_CACHE_LIMIT = 100_000;

  /** Appends the ids of `text` (spaces already escaped to '▁') to `out`. */
  encode(text: string, out: number[]): void {
    if (!this.wordsIndependent) {
      this.encodeMerged(text, out);
      return;
    }
    let start = 0;
    for (let i = 1; i <= text.length; i++) {
      if (i < text.length && !(text.charCodeAt(i) === 0x2581 && text.charCodeAt(i - 1) !== 0x2581)) continue;
      const word = text.slice(start, i);
      start = i;
      let ids = this.wordCache.get(word);
      if (ids === undefined) {
        ids = [];
        this.encodeMerged(word, ids);
        if (this.wordCache.size >= SpmModel.WORD_CACHE_LIMIT) this.wordCache.clear();
        this.wordCache.set(word, ids);
      }
      for (let k = 0; k < ids.length; k++) out.push(ids[k]);
    }
  }

  private encodeMerged(text: string, out: number[]): void {
    // Symbols are spans [start, start + len) of `text` (UTF-16 units), one per code point at first;
    // merging grows the left span and empties the right one, so text is only sliced on cache misses.
    const n = countCodePoints(text);
    if (n === 0) return;
    const start = new Int32Array(n);
    const len = new Int32Array(n);
    const symId = new Int32Array(n);
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0, pos = 0; i < n; i++) {
      const c = text.charCodeAt(pos);
      const w = c >= 0xd800 && c <= 0xdbff && isLowSurrogate(text.charCodeAt(pos + 1)) ? 2 : 1;
      start[i] = pos;
      len[i] = w;
      symId[i] = this.tokenToId.get(text.slice(pos, pos + w)) ?? -1;
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
      pos += w;
    }
    const pieceOf = (l: number, r: number): number => {
      const a = symId[l];
      const b = symId[r];
      if (a < 0 || b < 0 || !this.cacheable) return this.tokenToId.get(text.slice(start[l], start[r] + len[r])) ?? -1;
      const key = a * ID_SHIFT + b;
      let id = this.pairCache.get(key);
      if (id === undefined) {
        id = this.tokenToId.get(text.slice(start[l], start[r] + len[r])) ?? -1;
        if (this.pairCache.size >= 1 << 20) this.pairCache.clear();
        this.pairCache.set(key, id);
      }
      return id;
    };
    // The heap is a min-heap on rank: use −score as rank so the highest score pops first.
    const queue = new MergeQueue();
    const tryAdd = (l: number, r: number) => {
      if (l < 0 || r < 0) return;
      const id = pieceOf(l, r);
      if (id < 0) return;
      queue.push(-this.scores[id], l, r, len[l] + len[r]);
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    while (queue.pop()) {
      const l = queue.topLeft;
      const r = queue.topRight;
      if (len[l] === 0 || len[r] === 0 || len[l] + len[r] !== queue.topSize) continue;
      symId[l] = pieceOf(l, r);
      len[l] += len[r];
      len[r] = 0;
      symId[r] = -1;
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      tryAdd(prev[l], l);
      tryAdd(l, next[l]);
    }
    // Every merge produced a vocabulary piece, so a final symbol is either a piece or a single code
    // point outside the vocabulary, which falls back to its UTF-8 bytes (llama.cpp's resegment reduces
    // to exactly this).
    for (let i = 0; i >= 0; i = next[i]) {
      if (symId[i] >= 0) {
        out.push(symId[i]);
        continue;
      }
      for (const b of enc.encode(text.slice(start[i], start[i] + len[i]))) {
        const bt = this.byteTokens[b];
        if (bt >= 0) out.push(bt);
        else if (this.unkId !== undefined) out.push(this.unkId);
      }
    }
  }
}

function countCodePoints(s: string): number {
  let n = 0;
  for (let i = 0; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c >= 0xd800 && c <= 0xdbff && isLowSurrogate(s.charCodeAt(i + 1))) i++;
    n++;
  }
  return n;
}

function isLowSurrogate(c: number): boolean {
  return c >= 0xdc00 && c <= 0xdfff; // NaN past the end compares false
}
