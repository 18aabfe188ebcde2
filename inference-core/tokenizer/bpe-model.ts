/**
 * Byte-level BPE (tokenizer.ggml.model = "gpt2"), the algorithm of
 * llama.cpp's llm_tokenizer_bpe_session: each pre-tokenized word is
 * byte-encoded, split into one symbol per byte, and the adjacent pair of
 * lowest merge rank (leftmost on ties) is merged until no ranked pair is
 * left. With `ignoreMerges` (llama3), a word that is itself a token is
 * emitted whole. Results are cached per word.
 */
import { byteEncode } from './byte-unicode.ts';
import { MergeQueue } from './min-heap.ts';

export class BpeModel {
  private readonly ranks = new Map<string, number>();
  private readonly cache = new Map<string, number[]>();
  private static readonly CACHE_LIMIT = 200_000;

  constructor(
    private readonly tokenToId: ReadonlyMap<string, number>,
    merges: readonly string[],
    private readonly ignoreMerges: boolean,
  ) {
    for (let i = 0; i < merges.length; i++) {
      const m = merges[i];
      const sp = m.indexOf(' ', 1);
      if (sp < 0) continue;
      // Key with a separator no byte-level token contains.
      const key = m.slice(0, sp) + '\u0000' + m.slice(sp + 1);
      if (!this.ranks.has(key)) this.ranks.set(key, i);
    }
  }

  /** Appends the ids of one pre-tokenized word to `out`. */
  encodeWord(word: string, out: number[]): void {
    let ids = this.cache.get(word);
    if (ids === undefined) {
      ids = this.encodeUncached(byteEncode(word));
      if (this.cache.size >= BpeModel.CACHE_LIMIT) this.cache.clear();
      this.cache.set(word, ids);
    }
    for (let i = 0; i < ids.length; i++) out.push(ids[i]);
  }

  private encodeUncached(encoded: string): number[] {
    if (this.ignoreMerges) {
      const whole = this.tokenToId.get(encoded);
      if (whole !== undefined) return [whole];
    }
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
      if (rank !== undefined) queue.push({ rank, left: l, right: r, size: text[l].length + text[r].length });
    };
    for (let i = 1; i < n; i++) tryAdd(i - 1, i);
    for (let c = queue.pop(); c !== undefined; c = queue.pop()) {
      const l = c.left;
      const r = c.right;
      // Stale: one side was merged away or grew since this candidate was queued.
      if (text[l] === '' || text[r] === '' || next[l] !== r || text[l].length + text[r].length !== c.size) continue;
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
