/**
 * A growable run of token ids in one Uint32Array: what a prompt is built in
 * (src/recipe) and what a request's KV mirrors (src/workers), so ids stay
 * typed from the tokenizer to the engine. Appends copy with `set` (no per-id
 * push onto a JS array, no argument spread, which overflows the stack past
 * ~100k ids); the buffer doubles when full.
 *
 * `view` is the ids as a Uint32Array over the buffer, not a copy: it reads
 * the current ids until the next append, truncate or clear (a grown buffer
 * leaves an old view on the old one). Take a fresh view at each use, or
 * `copy()` to keep one.
 */
export class TokenIds {
  private buffer: Uint32Array;
  private used = 0;

  /** `initial`: ids to start with (copied), or a capacity. */
  constructor(initial: ArrayLike<number> | number = 64) {
    if (typeof initial === 'number') this.buffer = new Uint32Array(Math.max(1, initial));
    else {
      this.buffer = new Uint32Array(Math.max(1, initial.length));
      this.append(initial);
    }
  }

  get length(): number {
    return this.used;
  }

  /** The ids, as a view over the buffer (see the class comment). */
  get view(): Uint32Array {
    return this.buffer.subarray(0, this.used);
  }

  push(id: number): void {
    this.reserve(1);
    this.buffer[this.used++] = id;
  }

  append(ids: ArrayLike<number>): void {
    const n = ids.length;
    if (n === 0) return;
    this.reserve(n);
    if (ids instanceof Uint32Array) this.buffer.set(ids, this.used);
    else for (let i = 0; i < n; i++) this.buffer[this.used + i] = ids[i];
    this.used += n;
  }

  /** Keeps the first `length` ids. */
  truncate(length: number): void {
    if (!Number.isInteger(length) || length < 0 || length > this.used) throw new RangeError(`cannot truncate ${this.used} token ids to ${length}`);
    this.used = length;
  }

  /** The ids in a Uint32Array of their own, exactly as long. */
  copy(): Uint32Array {
    return this.buffer.slice(0, this.used);
  }

  private reserve(more: number): void {
    const needed = this.used + more;
    if (needed <= this.buffer.length) return;
    const grown = new Uint32Array(Math.max(needed, this.buffer.length * 2));
    grown.set(this.buffer.subarray(0, this.used));
    this.buffer = grown;
  }
}
