/**
 * SentencePiece-style tokenizer (tokenizer.ggml.model = "llama"), the
 * algorithm of llama.cpp's llm_tokenizer_spm: the text (spaces already
 * escaped to '▁') starts as one symbol per code point; repeatedly the
 * adjacent pair whose concatenation is a vocabulary piece with the highest
 * score (leftmost on ties) is merged. Each final symbol is emitted as its
 * piece, or as <0xNN> byte
 * tokens when nothing matches (byte fallback), or <unk>.
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
  }

  private readonly cacheable: boolean;

  encode(text: string, out: number[]): void {
    const chars = Array.from(text);
    const n = chars.length;
    if (n === 0) return;
    const sym = chars.slice();
    // Token id of each live symbol (-1: not a piece, e.g. a code point left to byte fallback).
    const symId = new Int32Array(n);
    for (let i = 0; i < n; i++) symId[i] = this.tokenToId.get(chars[i]) ?? -1;
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    // The heap is a min-heap on rank: use −score as rank so the highest score pops first.
    const queue = new MergeQueue();
    const pieceOf = (l: number, r: number): number => {
      const a = symId[l];
      const b = symId[r];
      if (a < 0 || b < 0 || !this.cacheable) return this.tokenToId.get(sym[l] + sym[r]) ?? -1;
      const key = a * ID_SHIFT + b;
      let id = this.pairCache.get(key);
      if (id === undefined) {
        id = this.tokenToId.get(sym[l] + sym[r]) ?? -1;
        if (this.pairCache.size >= 1 << 20) this.pairCache.clear();
        this.pairCache.set(key, id);
      }
      return id;
    };
    const tryAdd = (l: number, r: number) => {
      if (l < 0 || r < 0) return;
      const id = pieceOf(l, r);
      if (id < 0) return;
      queue.push({ rank: -this.scores[id], left: l, right: r, size: sym[l].length + sym[r].length });
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    for (let c = queue.pop(); c !== undefined; c = queue.pop()) {
      const l = c.left;
      const r = c.right;
      if (sym[l] === '' || sym[r] === '' || sym[l].length + sym[r].length !== c.size) continue;
      const merged = pieceOf(l, r);
      sym[l] += sym[r];
      sym[r] = '';
      symId[l] = merged;
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
      const id = this.tokenToId.get(sym[i]);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      for (const b of enc.encode(sym[i])) {
        const bt = this.byteTokens[b];
        if (bt >= 0) out.push(bt);
        else if (this.unkId !== undefined) out.push(this.unkId);
      }
    }
  }
}
