/**
 * Binary min-heap ordered by (rank, left): the merge queue of both BPE
 * variants. Entries live in parallel typed arrays (no object per candidate;
 * a long SPM input queues hundreds of thousands of them).
 */
export class MergeQueue {
  private rank = new Float64Array(256);
  private left = new Int32Array(256);
  private right = new Int32Array(256);
  private size = new Int32Array(256);
  private n = 0;
  /** The entry pop() returned last. */
  topLeft = 0;
  topRight = 0;
  topSize = 0;

  get length(): number {
    return this.n;
  }

  private grow(): void {
    const cap = this.rank.length * 2;
    const g = <T extends Float64Array | Int32Array>(a: T, make: (n: number) => T): T => {
      const b = make(cap);
      b.set(a);
      return b;
    };
    this.rank = g(this.rank, (k) => new Float64Array(k));
    this.left = g(this.left, (k) => new Int32Array(k));
    this.right = g(this.right, (k) => new Int32Array(k));
    this.size = g(this.size, (k) => new Int32Array(k));
  }

  private less(i: number, j: number): boolean {
    const ri = this.rank[i];
    const rj = this.rank[j];
    return ri !== rj ? ri < rj : this.left[i] < this.left[j];
  }

  private swap(i: number, j: number): void {
    let t = this.rank[i]; this.rank[i] = this.rank[j]; this.rank[j] = t;
    t = this.left[i]; this.left[i] = this.left[j]; this.left[j] = t;
    t = this.right[i]; this.right[i] = this.right[j]; this.right[j] = t;
    t = this.size[i]; this.size[i] = this.size[j]; this.size[j] = t;
  }

  push(rank: number, left: number, right: number, size: number): void {
    if (this.n === this.rank.length) this.grow();
    let i = this.n++;
    this.rank[i] = rank;
    this.left[i] = left;
    this.right[i] = right;
    this.size[i] = size;
    while (i > 0) {
      const p = (i - 1) >> 1;
      if (!this.less(i, p)) break;
      this.swap(i, p);
      i = p;
    }
  }

  /** Removes the smallest entry into topLeft/topRight/topSize; false when empty. */
  pop(): boolean {
    if (this.n === 0) return false;
    this.topLeft = this.left[0];
    this.topRight = this.right[0];
    this.topSize = this.size[0];
    const last = --this.n;
    if (last > 0) {
      this.rank[0] = this.rank[last];
      this.left[0] = this.left[last];
      this.right[0] = this.right[last];
      this.size[0] = this.size[last];
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < last && this.less(l, m)) m = l;
        if (r < last && this.less(r, m)) m = r;
        if (m === i) break;
        this.swap(i, m);
        i = m;
      }
    }
    return true;
  }
}
