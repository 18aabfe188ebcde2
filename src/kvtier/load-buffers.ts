import type { GetOptions } from '../../storage-adapters/index.ts';
import type { DecodedBlock } from './block-codec.ts';
import { BufferLease, ReadBufferPool } from './read-buffer-pool.ts';

/**
 * The recycled buffers one block read uses (KvTier.loadOne): the read buffer
 * `store.get` fills and, under a codec, the decompressed payload. Only
 * buffers this object took from the pool (or a sealed block's fresh
 * plaintext) are ever given back: a store that ignores `allocate`, or a
 * pending write's bytes, keep their own buffers untouched.
 */
export class BlockReadBuffers {
  private readonly taken = new Set<ArrayBuffer>();
  private readonly owned: ArrayBuffer[] = [];

  constructor(private readonly pool: ReadBufferPool) {}

  readonly allocate = (size: number): Uint8Array => {
    const view = this.pool.take(size);
    this.taken.add(view.buffer as ArrayBuffer);
    return view;
  };

  /** What `store.get` is given: read into the pool's buffers, and refuse a blob past the pool's largest take before sizing anything to it. */
  get getOptions(): GetOptions {
    return { allocate: this.allocate, maxBytes: this.pool.maxTakeBytes };
  }

  /** Marks `bytes`' buffer as this block's if it came from `allocate` (or `fresh`: made for this read alone and held by no one else). */
  own(bytes: Uint8Array, fresh = false): void {
    const buffer = bytes.buffer as ArrayBuffer;
    if ((fresh || this.taken.has(buffer)) && !this.owned.includes(buffer)) this.owned.push(buffer);
  }

  /** Attaches a lease over the owned buffers to a verified block (no holder yet). */
  attach(block: DecodedBlock): void {
    this.own(block.payload);
    if (this.owned.length > 0) block.lease = new BufferLease(this.pool, this.owned);
  }

  /** A block that failed its checks: nobody holds its buffers, so they go back now. */
  discard(): void {
    if (this.owned.length > 0) new BufferLease(this.pool, this.owned).discardUnheld();
  }
}

/**
 * What `LoadedBlocks.release` does: lets go of each block's lease once (a
 * second call does nothing). Blocks loaded from the hot cache or read into
 * recycled buffers return to the pool when the cache lets go too.
 */
export function releaserOf(leases: readonly (BufferLease | undefined)[]): () => void {
  let released = false;
  return () => {
    if (released) return;
    released = true;
    for (const lease of leases) lease?.unref();
  };
}
