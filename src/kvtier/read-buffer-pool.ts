/**
 * Recycled read buffers for the hit path. A fresh block-sized buffer per read
 * cost more than the read itself (allocation + first-touch page faults, and
 * the GC's external-memory pressure: bench/RESULTS.md "storage"); a buffer
 * whose block every holder has released is read into again instead.
 *
 *   load ──take──▶ store.get / decode into it ──▶ BufferLease (the block's buffers)
 *   holders: the load's result (until LoadedBlocks.release) and the hot cache (until evicted)
 *   last holder lets go ──▶ every buffer is *transferred* (detached) ──▶ pool ──▶ next take
 *
 * Detaching is what makes reuse safe: every view anyone still holds of a
 * released block (payload, tokens, the file) becomes zero-length, so a
 * caller that keeps using a block after releasing it reads nothing, never a
 * later block's bytes. A holder that never releases simply leaves its
 * buffers to the GC; nothing is pooled that is still referenced by a lease.
 */
import { BlockError } from './errors.ts';

const CAPACITY_STEP = 64 * 1024;

/**
 * The largest buffer a load sizes from what storage says (a file's size, an
 * object's Content-Length, a header's payload length). A real block is a few
 * MiB (tens for a 405B model at f32); storage can claim anything: a sparse
 * file of terabytes costs no disk, and sizing a buffer to it fails the
 * allocation or takes the RAM. Past this the read is refused before a buffer
 * exists (StorageTooLargeError from the store, KVT_ERR_BLOCK_TOO_LARGE from `take`).
 */
export const MAX_BLOCK_READ_BYTES = 1024 * 1024 * 1024;

export class ReadBufferPool {
  /** Free buffers, most recently released last (the warmest in cache is taken first). */
  private readonly free: ArrayBuffer[] = [];
  private freeBytes = 0;
  /** Buffers handed out by `take` and buffers taken back, for stats and tests. */
  readonly counts = { taken: 0, reused: 0, returned: 0, dropped: 0 };

  /**
   * `budgetBytes`: free bytes kept at most (0 = no pooling: every take allocates).
   * `maxTakeBytes`: the largest single take; larger ones throw BlockError KVT_ERR_BLOCK_TOO_LARGE (nothing allocated).
   */
  constructor(
    readonly budgetBytes: number,
    readonly maxTakeBytes = MAX_BLOCK_READ_BYTES,
  ) {}

  /** A view of exactly `size` bytes over a recycled buffer when one fits, else a new one (capacity rounded up to 64 KiB). */
  take(size: number): Uint8Array {
    if (!Number.isSafeInteger(size) || size < 0 || size > this.maxTakeBytes) {
      throw new BlockError('KVT_ERR_BLOCK_TOO_LARGE', `a block read needs a ${size}-byte buffer, more than the ${this.maxTakeBytes} a load takes; the stored block is foreign or corrupt`);
    }
    this.counts.taken++;
    for (let i = this.free.length - 1; i >= 0; i--) {
      const buffer = this.free[i];
      // Up to one step of slack: a buffer much larger than the block would pin RAM it does not use.
      if (buffer.byteLength >= size && buffer.byteLength <= roundUp(size) + CAPACITY_STEP) {
        this.free.splice(i, 1);
        this.freeBytes -= buffer.byteLength;
        this.counts.reused++;
        return new Uint8Array(buffer, 0, size);
      }
    }
    return new Uint8Array(new ArrayBuffer(this.budgetBytes > 0 ? roundUp(size) : size), 0, size);
  }

  /**
   * Takes `buffer` back. It is detached first (moved to a new ArrayBuffer
   * object, no copy), so every existing view of it reads as empty. Buffers
   * that cannot be detached (already detached, not transferable) are dropped.
   */
  give(buffer: ArrayBuffer): void {
    let moved: ArrayBuffer;
    if (buffer.byteLength === 0) {
      this.counts.dropped++; // detached already (given back before) or empty
      return;
    }
    try {
      moved = structuredClone(buffer, { transfer: [buffer] });
    } catch {
      this.counts.dropped++;
      return;
    }
    if (this.freeBytes + moved.byteLength > this.budgetBytes) {
      this.counts.dropped++;
      return;
    }
    this.free.push(moved);
    this.freeBytes += moved.byteLength;
    this.counts.returned++;
  }

  get pooledBytes(): number {
    return this.freeBytes;
  }

  clear(): void {
    this.free.length = 0;
    this.freeBytes = 0;
  }
}

/**
 * The buffers one loaded block lives in, counted by holder. `ref` per holder,
 * `unref` when it lets go; at zero the buffers go back to the pool (detached).
 */
export class BufferLease {
  private refs = 0;
  private done = false;

  constructor(
    private readonly pool: ReadBufferPool,
    private readonly buffers: readonly ArrayBuffer[],
  ) {}

  ref(): void {
    if (this.done) throw new Error('BufferLease.ref after its buffers went back to the pool (a holder released twice)');
    this.refs++;
  }

  unref(): void {
    if (this.done || this.refs === 0) return;
    if (--this.refs > 0) return;
    this.done = true;
    for (const buffer of new Set(this.buffers)) this.pool.give(buffer);
  }

  /** Gives the buffers back now if no holder ever took them (a block that failed its checks). */
  discardUnheld(): void {
    if (this.done || this.refs > 0) return;
    this.done = true;
    for (const buffer of new Set(this.buffers)) this.pool.give(buffer);
  }

  get released(): boolean {
    return this.done;
  }

  get holders(): number {
    return this.refs;
  }
}

function roundUp(size: number): number {
  return Math.max(CAPACITY_STEP, Math.ceil(size / CAPACITY_STEP) * CAPACITY_STEP);
}
