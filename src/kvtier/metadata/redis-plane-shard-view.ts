/**
 * One shard of a sharded Redis plane as a plane of its own (MetadataPlane.shard): what GC of that
 * shard enumerates — trust, the rebuild's listing prefixes, the last-use walks, batch takes, the
 * pending-delete journal, usage, orphan sightings — reads only this shard's keys (one slot, one
 * primary), so a lost or failing-over other shard never blocks it. Calls that name keys go through
 * the whole plane, which sends each key to its own shard (GC only names keys of this shard; a caller
 * naming others still reaches the right records).
 */
import type { BlockRecord, MetadataPlane, PlaneState, PlaneUsage, RemovedBatch, RemoveOptions, ScanOptions, ScanPage } from './metadata-plane.ts';
import type { RedisPlaneCommands } from './redis-plane-commands.ts';
import { pendingDeletes, removeOldest } from './redis-plane-removal.ts';
import { orphanSightings, shardUsage } from './redis-plane-records.ts';
import { shardKeyPrefixes, shardState } from './redis-plane-shards.ts';
import { scanByLastUse } from './redis-plane-walk.ts';

/** What a view needs of its whole plane. */
export interface ShardedPlane extends MetadataPlane {
  /** Tells local listeners and other nodes about keys removed (as the whole plane's removals). */
  tellRemoved(keys: string[], members: Buffer): Promise<void>;
  /** Every shard's usage, in shard order. */
  shardUsages(): Promise<PlaneUsage[]>;
}

export class RedisPlaneShardView implements MetadataPlane {
  readonly kind = 'redis';
  readonly shardCount = 1;

  constructor(
    private readonly whole: ShardedPlane,
    /** This shard's number in the whole plane. */
    readonly shardNumber: number,
    private readonly commands: RedisPlaneCommands,
    private readonly bits: number,
  ) {}

  state(): Promise<PlaneState> {
    return shardState(this.commands);
  }

  keyPrefixes(): string[] {
    return shardKeyPrefixes(this.shardNumber, this.bits);
  }

  /** A rebuild of this shard lists its own key range only. */
  async rebuildScope(): Promise<string[] | undefined> {
    return this.keyPrefixes();
  }

  async markTrusted(generation: string): Promise<boolean> {
    return (await this.commands.call(() => this.commands.script('kvtPlaneMarkTrusted', this.commands.keys.gen, generation))) === 1;
  }

  get(keys: readonly string[]): Promise<(BlockRecord | null)[]> {
    return this.whole.get(keys);
  }

  upsert(records: readonly BlockRecord[], options?: { ifAbsent?: boolean }): Promise<void> {
    return this.whole.upsert(records, options);
  }

  renew(keys: readonly string[], at: number, depths?: readonly number[]): void {
    this.whole.renew(keys, at, depths);
  }

  flush(): Promise<void> {
    return this.whole.flush();
  }

  remove(keys: readonly string[], options?: RemoveOptions): Promise<BlockRecord[]> {
    return this.whole.remove(keys, options);
  }

  scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    return scanByLastUse([this.commands], options);
  }

  async removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch> {
    const taken = await removeOldest(this.commands, options);
    await this.whole.tellRemoved(taken.keys, taken.members);
    return { keys: taken.keys, freed: taken.freed, more: taken.more };
  }

  pendingDeletes(): Promise<string[]> {
    return pendingDeletes(this.commands);
  }

  clearPendingDeletes(keys: readonly string[]): Promise<void> {
    return this.whole.clearPendingDeletes(keys);
  }

  async usage(): Promise<PlaneUsage> {
    const usage = await shardUsage(this.commands);
    for (const side of [usage.bytes, usage.blocks]) for (const [tag, n] of Object.entries(side)) if (n === 0) delete side[tag];
    return usage;
  }

  shardUsages(): Promise<PlaneUsage[]> {
    return this.whole.shardUsages();
  }

  noteOrphans(keys: readonly string[], at: number): Promise<number[]> {
    return this.whole.noteOrphans(keys, at);
  }

  clearOrphans(keys: readonly string[]): Promise<void> {
    return this.whole.clearOrphans(keys);
  }

  orphanSightings(): Promise<Map<string, number>> {
    return orphanSightings(this.commands);
  }

  onRemoved(listener: (keys: string[]) => void): () => void {
    return this.whole.onRemoved(listener);
  }

  /** The whole plane owns the connection. */
  async close(): Promise<void> {}
}
