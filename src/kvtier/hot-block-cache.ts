import type { DecodedBlock } from './block-codec.ts';

/**
 * In-RAM LRU of verified blocks, bounded by bytes (the encoded file plus a
 * compressed block's decompressed payload: what each entry pins). A Map iterates in insertion order, so re-inserting
 * on a hit makes the first entry the least recently used: O(1) get, put and
 * evict.
 */
export class HotBlockCache {
  private readonly entries = new Map<string, DecodedBlock>();
  private bytes = 0;

  constructor(readonly budgetBytes: number) {}

  get(key: string): DecodedBlock | undefined {
    const block = this.entries.get(key);
    if (block === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, block);
    return block;
  }

  put(block: DecodedBlock): void {
    const size = block.residentBytes;
    if (size > this.budgetBytes) return;
    // The cache is one holder of a block in recycled buffers (read-buffer-pool.ts) until it lets go.
    block.lease?.ref();
    this.delete(block.key);
    this.entries.set(block.key, block);
    this.bytes += size;
    for (const [key, oldest] of this.entries) {
      if (this.bytes <= this.budgetBytes) break;
      this.entries.delete(key);
      this.bytes -= oldest.residentBytes;
      oldest.lease?.unref();
    }
  }

  delete(key: string): void {
    const block = this.entries.get(key);
    if (block === undefined) return;
    this.entries.delete(key);
    this.bytes -= block.residentBytes;
    block.lease?.unref();
  }

  get size(): number {
    return this.entries.size;
  }

  get usedBytes(): number {
    return this.bytes;
  }

  clear(): void {
    for (const block of this.entries.values()) block.lease?.unref();
    this.entries.clear();
    this.bytes = 0;
  }
}
