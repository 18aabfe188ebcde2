/** Binary min-heap ordered by (rank, left): the merge queue of both BPE variants. */
export interface MergeCandidate {
  rank: number;
  left: number;
  right: number;
  /** Total length of the merged text, to detect stale entries. */
  size: number;
}

export class MergeQueue {
  private readonly h: MergeCandidate[] = [];
  get length(): number {
    return this.h.length;
  }
  private less(a: MergeCandidate, b: MergeCandidate): boolean {
    return a.rank !== b.rank ? a.rank < b.rank : a.left < b.left;
  }
  push(x: MergeCandidate): void {
    const h = this.h;
    h.push(x);
    let i = h.length - 1;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(h[i], h[p])) break;
      const t = h[i]; h[i] = h[p]; h[p] = t;
      i = p;
    }
  }
  pop(): MergeCandidate | undefined {
    const h = this.h;
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
        if (l < h.length && this.less(h[l], h[m])) m = l;
        if (r < h.length && this.less(h[r], h[m])) m = r;
        if (m === i) break;
        const t = h[i]; h[i] = h[m]; h[m] = t;
        i = m;
      }
    }
    return top;
  }
}
