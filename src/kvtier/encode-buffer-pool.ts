/**
 * Buffers for encoded blocks, reused once their write is done.
 *
 * Why: every block a node stores was encoded into a fresh ArrayBuffer of
 * its own, and on the #29 replay that allocation (fresh memory, page
 * faults) was ~10 µs of the write path's CPU per block, the largest single
 * item of its profile; a block of a real model (hundreds of KiB and more)
 * is mapped and unmapped afresh per block.
 *
 * Ownership rule: a buffer is given back only by the write that encoded it,
 * after its put resolved (a BlobStore is done with a put's bytes by then:
 * blob-store.ts), and only when nothing else saw the bytes: no load read
 * them from the block's flight (block-flights.ts `written` says), the hot
 * tier did not take them, and the put did not fail (an S3 request may
 * outlive its rejection). Anything else is left to the GC as before.
 *
 * Free buffers are kept per exact size (a tier writes blocks of one or a
 * few layouts), most recently returned first, up to `maxBytes` in all.
 */
import { ownBuffer } from './block-codec.ts';

export class EncodeBufferPool {
  private readonly free = new Map<number, Uint8Array[]>();
  private freeBytes = 0;

  constructor(private readonly maxBytes: number) {}

  /** `take` as a function of its own (BlockCodec.encode's allocator). */
  readonly allocate = (size: number): Uint8Array => this.take(size);

  /** A buffer of exactly `size` bytes with an ArrayBuffer of its own; its contents are whatever they were. */
  take(size: number): Uint8Array {
    const list = this.free.get(size);
    const reused = list?.pop();
    if (reused !== undefined) {
      this.freeBytes -= size;
      return reused;
    }
    return ownBuffer(size);
  }

  /** Takes `bytes` back for a later `take` (the caller holds the only reference); over the budget, or a view, it is dropped. */
  give(bytes: Uint8Array): void {
    const size = bytes.byteLength;
    if (size === 0 || bytes.byteOffset !== 0 || bytes.buffer.byteLength !== size || this.freeBytes + size > this.maxBytes) return;
    let list = this.free.get(size);
    if (list === undefined) this.free.set(size, (list = []));
    list.push(bytes);
    this.freeBytes += size;
  }

  /** Bytes held free. */
  get heldBytes(): number {
    return this.freeBytes;
  }

  clear(): void {
    this.free.clear();
    this.freeBytes = 0;
  }
}
