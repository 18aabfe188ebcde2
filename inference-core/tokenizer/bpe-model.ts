/**
 * Byte-level BPE (tokenizer.ggml.model = "gpt2"), the algorithm of
 * llama.cpp's llm_tokenizer_bpe_session: each pre-tokenized word is
 * byte-encoded, split into one symbol per byte, and the adjacent pair of
 * lowest merge rank (leftmost on ties) is merged until no ranked pair is
 * left. With `ignoreMerges` (llama3), a word that is itself a token is
 * emitted whole. Results are cached per word.
 */
import { BYTE_TO_UNICODE, byteEncode } from './byte-unicode.ts';

const utf8 = new TextEncoder();
import { MergeQueue } from './min-heap.ts';

const ID_SHIFT = 2 ** 21;

export class BpeModel {
  /**
   * (left, right) text → rank: only for a vocabulary whose merges are not all tokens (the id
   * paths are inexact there). Other vocabularies never build it: for a 200k vocabulary its half a
   * million string keys were most of the construction time.
   */
  private readonly ranks = new Map<string, number>();
  /** (left id, right id) → rank·2²¹ + merged id; the fast path for words of token-id symbols. */
  private readonly idMerges = new Map<number, number>();
  /** Token id of each byte's single-symbol token; -1 where the vocabulary lacks it. */
  private readonly byteIds = new Int32Array(256).fill(-1);
  /** False when some merge's parts or result are not tokens: then only the string path is exact. */
  private readonly idPathExact: boolean;
  private readonly cache = new Map<string, number[]>();
  private static readonly CACHE_LIMIT = 200_000;

  constructor(
    private readonly tokenToId: ReadonlyMap<string, number>,
    merges: readonly string[],
    private readonly ignoreMerges: boolean,
  ) {
    let exact = tokenToId.size < ID_SHIFT && merges.length < ID_SHIFT;
    for (let b = 0; b < 256; b++) {
      const id = tokenToId.get(BYTE_TO_UNICODE[b]);
      if (id === undefined) exact = false;
      else this.byteIds[b] = id;
    }
    for (let i = 0; i < merges.length && exact; i++) {
      const m = merges[i];
      const sp = m.indexOf(' ', 1);
      if (sp < 0) continue;
      const l = tokenToId.get(m.slice(0, sp));
      const r = tokenToId.get(m.slice(sp + 1));
      const merged = tokenToId.get(m.slice(0, sp) + m.slice(sp + 1));
      if (l === undefined || r === undefined || merged === undefined) {
        exact = false;
        break;
      }
      const key = l * ID_SHIFT + r;
      if (!this.idMerges.has(key)) this.idMerges.set(key, i * ID_SHIFT + merged);
    }
    this.idPathExact = exact;
    if (!exact) {
      this.idMerges.clear();
      for (let i = 0; i < merges.length; i++) {
        const m = merges[i];
        const sp = m.indexOf(' ', 1);
        if (sp < 0) continue;
        // Key with a separator no byte-level token contains.
        const key = m.slice(0, sp) + '\u0000' + m.slice(sp + 1);
        if (!this.ranks.has(key)) this.ranks.set(key, i);
      }
    }
  }

  /** Appends the ids of one pre-tokenized word to `out`. */
  encodeWord(word: string, out: number[]): void {
    let ids = this.cache.get(word);
    if (ids === undefined) {
      ids = this.encodeUncached(word);
      if (this.cache.size >= BpeModel.CACHE_LIMIT) this.cache.clear();
      this.cache.set(word, ids);
    }
    for (let i = 0; i < ids.length; i++) out.push(ids[i]);
  }

  private encodeUncached(word: string): number[] {
    if (this.ignoreMerges) {
      const whole = this.tokenToId.get(byteEncode(word));
      if (whole !== undefined) return [whole];
    }
    if (!this.idPathExact) return this.mergeStrings(byteEncode(word));
    const bytes = utf8.encode(word);
    return bytes.length <= 64 ? this.mergeIds(bytes) : this.mergeIdsQueued(bytes);
  }

  /**
   * Short words on token ids: repeatedly merge the adjacent pair of lowest
   * rank, leftmost on ties — the same order llama.cpp's queue pops them in.
   */
  private mergeIds(bytes: Uint8Array): number[] {
    const sym: number[] = new Array(bytes.length);
    for (let i = 0; i < bytes.length; i++) sym[i] = this.byteIds[bytes[i]];
    for (;;) {
      let best = -1;
      let bestRank = Infinity;
      let bestId = 0;
      for (let i = 0; i + 1 < sym.length; i++) {
        const v = this.idMerges.get(sym[i] * ID_SHIFT + sym[i + 1]);
        if (v === undefined) continue;
        const rank = Math.floor(v / ID_SHIFT);
        if (rank < bestRank) {
          bestRank = rank;
          best = i;
          bestId = v - rank * ID_SHIFT;
        }
      }
      if (best < 0) return sym;
      sym[best] = bestId;
      sym.splice(best + 1, 1);
    }
  }

  /**
   * Long words on token ids: the same merge order as mergeIds (lowest rank, leftmost on ties),
   * from a queue of candidate pairs instead of a rescan per merge. A queued pair is stale once
   * either side was merged away or changed: its pair's rank then differs from the queued one
   * (a rank names one merge, so an equal rank is the same pair).
   */
  private mergeIdsQueued(bytes: Uint8Array): number[] {
    const n = bytes.length;
    const sym = new Int32Array(n);
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      sym[i] = this.byteIds[bytes[i]];
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    const rankOf = (l: number, r: number): number => {
      const v = this.idMerges.get(sym[l] * ID_SHIFT + sym[r]);
      return v === undefined ? -1 : Math.floor(v / ID_SHIFT);
    };
    const queue = new MergeQueue();
    const tryAdd = (l: number, r: number) => {
      if (l < 0 || r < 0) return;
      const rank = rankOf(l, r);
      if (rank >= 0) queue.push(rank, l, r, rank);
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    while (queue.pop()) {
      const l = queue.topLeft;
      const r = queue.topRight;
      if (sym[l] < 0 || sym[r] < 0 || next[l] !== r || rankOf(l, r) !== queue.topSize) continue;
      sym[l] = this.idMerges.get(sym[l] * ID_SHIFT + sym[r])! - queue.topSize * ID_SHIFT;
      sym[r] = -1;
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      tryAdd(prev[l], l);
      tryAdd(l, next[l]);
    }
    const out: number[] = [];
    for (let i = 0; i >= 0; i = next[i]) out.push(sym[i]);
    return out;
  }

  private mergeStrings(encoded: string): number[] {
    // Byte-encoded code points are all in the BMP: one UTF-16 unit per symbol.
    const n = encoded.length;
    const text: string[] = new Array(n);
    const prev = new Int32Array(n);
    const next = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      text[i] = encoded[i];
      prev[i] = i - 1;
      next[i] = i + 1 < n ? i + 1 : -1;
    }
    const queue = new MergeQueue();
    const tryAdd = (l: number, r: number) => {
      if (l < 0 || r < 0) return;
      const rank = this.ranks.get(text[l] + '\u0000' + text[r]);
      if (rank !== undefined) queue.push(rank, l, r, text[l].length + text[r].length);
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    while (queue.pop()) {
      const l = queue.topLeft;
      const r = queue.topRight;
      // Stale: one side was merged away or grew since this candidate was queued.
      if (text[l] === '' || text[r] === '' || next[l] !== r || text[l].length + text[r].length !== queue.topSize) continue;
      text[l] += text[r];
      text[r] = '';
      next[l] = next[r];
      if (next[r] >= 0) prev[next[r]] = l;
      tryAdd(prev[l], l);
      tryAdd(l, next[l]);
    }
    const out: number[] = [];
    for (let i = 0; i >= 0 && i < n; i = next[i]) {
      const id = this.tokenToId.get(text[i]);
      if (id !== undefined) {
        out.push(id);
        continue;
      }
      // A merged symbol missing from the vocabulary: fall back to its single-symbol tokens.
      for (const ch of text[i]) {
        const b = this.tokenToId.get(ch);
        if (b !== undefined) out.push(b);
      }
    }
    return out;
  }
}
