/**
 * Draft source (a): n-gram lookup in the request's own context (prompt and
 * output so far). Agents copy tool output, code and names, so the tokens that
 * followed an earlier occurrence of the context's last n tokens are a good
 * guess for what comes next — at no model cost.
 *
 *   context:  … a b c d e … x y a b c │          suffix "a b c" (n = 3) seen before at ┐
 *   draft:                              d e …    ← the tokens that followed it ───────┘
 *
 * The index maps every n-gram (n = 1..maxN) to the end of its most recent
 * occurrence that has a continuation, so a lookup is maxN map reads, not a
 * scan; it is updated incrementally as tokens are appended.
 */

export const NGRAM_MAX_N = 4;

export interface NgramDraft {
  /** Proposed continuation (may be empty: no earlier occurrence of any suffix). */
  tokens: number[];
  /** Length of the suffix that matched (0 when none). */
  matchN: number;
}

export class NgramIndex {
  private readonly ctx: number[] = [];
  /** n-gram key → end (exclusive) of its latest occurrence that has a following token. */
  private readonly latest: Map<string, number>[];

  constructor(readonly maxN = NGRAM_MAX_N, readonly minN = 1) {
    this.latest = Array.from({ length: maxN + 1 }, () => new Map<string, number>());
  }

  get length(): number {
    return this.ctx.length;
  }

  get tokens(): readonly number[] {
    return this.ctx;
  }

  append(tokens: ArrayLike<number>): void {
    for (let i = 0; i < tokens.length; i++) {
      this.ctx.push(tokens[i]);
      // The n-grams ending just before the new token now have a continuation (the new token).
      const end = this.ctx.length - 1;
      for (let n = this.minN; n <= this.maxN && n <= end; n++) this.latest[n].set(this.key(end - n, end), end);
    }
  }

  /** Drops tokens past `length` (a rejected tail); rebuilds the index (rare: only after a stop mid-draft). */
  truncate(length: number): void {
    if (length >= this.ctx.length) return;
    const kept = this.ctx.slice(0, length);
    this.ctx.length = 0;
    for (const m of this.latest) m.clear();
    this.append(kept);
  }

  /** The continuation of the longest suffix (maxN down to minN) seen earlier, up to `maxTokens` tokens. */
  lookup(maxTokens: number): NgramDraft {
    const len = this.ctx.length;
    if (maxTokens <= 0) return { tokens: [], matchN: 0 };
    for (let n = Math.min(this.maxN, len); n >= this.minN; n--) {
      const end = this.latest[n].get(this.key(len - n, len));
      if (end === undefined) continue;
      // The continuation may run into the suffix itself (a loop of period len − end):
      // then it repeats with that period, which is what the context says comes next.
      const period = len - end;
      const tokens: number[] = [];
      for (let i = 0; i < maxTokens; i++) tokens.push(this.ctx[end + (i % period)]);
      return { tokens, matchN: n };
    }
    return { tokens: [], matchN: 0 };
  }

  private key(from: number, to: number): string {
    let k = '';
    for (let i = from; i < to; i++) k += this.ctx[i] + ',';
    return k;
  }
}
