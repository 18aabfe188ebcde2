import type { DecodedBlock } from './block-codec.ts';
import type { DecodedTail } from './tail-codec.ts';

/** What the hot tier holds: verified blocks and units' tails (tier-units.ts), in one budget. */
type HotEntry = DecodedBlock | DecodedTail;

const isTail = (entry: HotEntry): entry is DecodedTail => 'sections' in entry;

/**
 * The node's hot RAM tier: an LRU of verified blocks and unit tails, bounded
 * by bytes (the encoded file plus any decompressed payload: what each entry
 * pins). One budget for both, so a tail pushes out the least recently used
 * block as another block would. A Map iterates in insertion order, so
 * re-inserting on a hit makes the first entry the least recently used: O(1)
 * get, put and evict.
 */
export class HotBlockCache {
  private readonly entries = new Map<string, HotEntry>();
  private bytes = 0;
  private tailCount = 0;

  constructor(readonly budgetBytes: number) {}

  get(key: string): DecodedBlock | undefined {
    const entry = this.touch(key);
    return entry === undefined || isTail(entry) ? undefined : entry;
  }

  getTail(key: string): DecodedTail | undefined {
    const entry = this.touch(key);
    return entry !== undefined && isTail(entry) ? entry : undefined;
  }

  put(entry: HotEntry): void {
    const size = entry.residentBytes;
    if (size > this.budgetBytes) return;
    // The cache is one holder of a block in recycled buffers (read-buffer-pool.ts) until it lets go.
    if (!isTail(entry)) entry.lease?.ref();
    this.delete(entry.key);
    this.entries.set(entry.key, entry);
    this.bytes += size;
    if (isTail(entry)) this.tailCount++;
    for (const key of this.entries.keys()) {
      if (this.bytes <= this.budgetBytes) break;
      this.delete(key);
    }
  }

  delete(key: string): void {
    const entry = this.entries.get(key);
    if (entry === undefined) return;
    this.entries.delete(key);
    this.bytes -= entry.residentBytes;
    if (isTail(entry)) this.tailCount--;
    else entry.lease?.unref();
  }

  /** Drops every entry `drop` names (a purge another handle of the index made: see KvTier.purge). */
  deleteWhere(drop: (key: string) => boolean): void {
    for (const key of [...this.entries.keys()]) if (drop(key)) this.delete(key);
  }

  /** Entries held, blocks and tails. */
  get size(): number {
    return this.entries.size;
  }

  /** Of `size`, the unit tails. */
  get tails(): number {
    return this.tailCount;
  }

  get usedBytes(): number {
    return this.bytes;
  }

  clear(): void {
    for (const entry of this.entries.values()) if (!isTail(entry)) entry.lease?.unref();
    this.entries.clear();
    this.bytes = 0;
    this.tailCount = 0;
  }

  private touch(key: string): HotEntry | undefined {
    const entry = this.entries.get(key);
    if (entry === undefined) return undefined;
    this.entries.delete(key);
    this.entries.set(key, entry);
    return entry;
  }
}
