/**
 * The cluster metadata plane: one shared record per stored block, the
 * retention truth every node and the GC judge by. Drivers: `RedisMetadataPlane`
 * (cluster, `REDIS_URL`) and `LmdbMetadataPlane` (embedded default). Both pass
 * test/src/kvtier/metadata/plane-conformance.ts.
 *
 * Contract (unstorage-style: few methods, every driver the same semantics):
 * - Keys are the block keys (32 lowercase hex chars, as on storage).
 * - `lastUseAt` only moves forward: a renewal older than the stored value is
 *   a no-op, so renewals from many nodes commute.
 * - `renew` is buffered and coalesced (a key renewed many times before the
 *   next flush costs one write); `flush` writes the buffer (pipelined / one
 *   transaction). A renewal of a key with no record creates nothing.
 * - `upsert` replaces class/tenant/size/writer/ttl of a record and raises its
 *   lastUse; `createdAt` of an existing record is kept. With `ifAbsent` only
 *   missing records are written (rebuild after data loss).
 * - `remove` returns the records it removed and tells every subscriber of
 *   `onRemoved` (all nodes, in the Redis driver) so node caches drop them.
 *   With `judgedLastUseAt` a record is removed only if its last use is still
 *   ≤ the one its remover judged (checked atomically with the removal), so a
 *   block renewed or rewritten on another node after GC read it survives.
 * - `scanByLastUse` walks records oldest last use first; the cursor makes a
 *   killed walk restartable. `capped` walks only records with a `ttlMs` cap.
 *   The last-use index is kept per traffic class: `trafficClass` walks one
 *   class only (the expire walk: every record of a class shares its policy
 *   TTL up to tenant overrides, so a walk up to now − that TTL reads only
 *   expired rows); without it the classes are merged into one last-use order
 *   (LRU eviction).
 * - `state()` says whether the plane can be trusted: `trusted: false` after
 *   it lost its data (a Redis restarted empty or replaced: the generation
 *   marker is gone), until a GC rebuilt the records from the storage listing
 *   and called `markTrusted(generation)`.
 * - Orphan bookkeeping (blobs on storage with no record) lives here too, so a
 *   blob is swept only after it was seen orphaned for a whole grace period,
 *   measured on the injected clock and by any GC node.
 */

/** One block as the whole cluster knows it. Times are ms since the epoch. */
export interface BlockRecord {
  /** 32 hex chars. */
  key: string;
  trafficClass: string;
  tenant: string;
  /** Encoded size on storage. */
  sizeBytes: number;
  /** Node id of the writer (`KvTierOptions.nodeId`); '' when rebuilt from storage. */
  writer: string;
  /** When first written; drivers may keep it to whole seconds. */
  createdAt: number;
  /** Latest use (write or hit) on any node. */
  lastUseAt: number;
  /** Client retention hint: this block expires `ttlMs` after its last use if that is sooner than the policy's TTL. 0 = no cap. */
  ttlMs: number;
  /** Block number in its prompt (deeper blocks go first among equal last use); a unit tail's: its block count. */
  depth: number;
  /**
   * 'tail' for a prefix unit's tail file (tier-units.ts, tail-codec.ts); absent for a block. Stored in
   * the record's spare bits (LMDB: the flags byte; Redis: a fifth number only on tails), so a block's
   * record is as small as before; usage counts tails under TAIL_TAG as well.
   */
  kind?: 'tail';
}

/** Usage tag of the unit tails among the records (beside "g", "c:<class>", "t:<tenant>"). */
export const TAIL_TAG = 'k:tail';

export type PlaneKind = 'redis' | 'lmdb';

export interface PlaneState {
  /** Changes whenever the plane's data was lost and started afresh. */
  generation: string;
  /** False until a rebuild from the storage listing finished for this generation. */
  trusted: boolean;
}

export interface ScanOptions {
  /** Only records whose lastUseAt ≤ this. */
  maxLastUseAt?: number;
  /** Opaque cursor from the previous page. */
  cursor?: string;
  /** Records per page; default 512. */
  limit?: number;
  /** Walk only records with a ttlMs cap. */
  capped?: boolean;
  /** Walk only records of this traffic class (its own last-use index). */
  trafficClass?: string;
}

export interface RemoveOptions {
  /**
   * Per key (same order): the last use its remover judged. A record whose
   * last use moved past it since (a renewal or rewrite by any node) is kept
   * and not returned.
   */
  judgedLastUseAt?: readonly number[];
  /**
   * Also note the removed keys in the plane's pending-delete journal (same atomic step) until
   * `clearPendingDeletes`: GC removes records before their blobs, and a GC killed in between
   * leaves the journal for the next run to finish instead of orphan blobs.
   */
  journal?: boolean;
}

export interface ScanPage {
  records: BlockRecord[];
  /** Undefined when the walk is done. */
  cursor: string | undefined;
}

/**
 * What `removeByLastUse` took: the keys and the bytes and blocks they held per scope tag (as `usage`),
 * summed inside the plane, so GC tallies a batch without a record object per block.
 */
export interface RemovedBatch {
  keys: string[];
  freed: PlaneUsage;
  /** Rows may remain below the bound. */
  more: boolean;
}

/** Bytes and blocks per scope tag: "g", "c:<class>", "t:<tenant>", and TAIL_TAG for the unit tails among them. */
export interface PlaneUsage {
  bytes: Record<string, number>;
  blocks: Record<string, number>;
}

export interface MetadataPlane {
  readonly kind: PlaneKind;
  state(): Promise<PlaneState>;
  /**
   * Which keys a rebuild from the storage listing must cover, as storage key prefixes whose union is
   * exactly those keys (the listing reads only them): a sharded plane whose other shards kept their
   * data answers the prefixes of the shards that lost it; undefined = every key (one shard, or all lost).
   */
  rebuildScope?(): Promise<string[] | undefined>;
  /** Shards S of a sharded plane (absent or 1: one shard). */
  readonly shardCount?: number;
  /**
   * Shard `s` of a sharded plane as a plane of its own, for GC of that shard alone: `state`,
   * `markTrusted`, `rebuildScope`, scans, batch takes, the journal, `usage` and orphan sightings read
   * and write only that shard (a lost or failing other shard does not block it); calls naming keys
   * reach the key's own shard as on the whole plane. Closing it closes nothing.
   */
  shard?(s: number): MetadataPlane;
  /** Storage key prefixes whose union is exactly the keys this plane (or shard view) holds; absent = every key. */
  keyPrefixes?(): string[];
  /**
   * A shard view's: the usage of every shard of its plane, in shard order (its own `usage` is its
   * shard's). A quota is over the whole plane: GC evicts each shard down to the level that fills it.
   */
  shardUsages?(): Promise<PlaneUsage[]>;
  /** Marks `generation` as rebuilt; a no-op if the generation changed meanwhile (returns false then). */
  markTrusted(generation: string): Promise<boolean>;
  /** Records, in the order of `keys` (null = no record). */
  get(keys: readonly string[]): Promise<(BlockRecord | null)[]>;
  /** Writes records (after a block was put, or rebuilt). */
  upsert(records: readonly BlockRecord[], options?: { ifAbsent?: boolean }): Promise<void>;
  /**
   * Buffers a use of each key at `at`; coalesced until `flush` (or the
   * driver's own timer / size trigger). `depths[i]` (block number in its
   * prompt) keeps deeper blocks first among equal last use; default 0.
   */
  renew(keys: readonly string[], at: number, depths?: readonly number[]): void;
  /** Writes buffered renewals. */
  flush(): Promise<void>;
  /** Removes records; returns those that existed (and, with `judgedLastUseAt`, were not used since). */
  remove(keys: readonly string[], options?: RemoveOptions): Promise<BlockRecord[]>;
  scanByLastUse(options?: ScanOptions): Promise<ScanPage>;
  /**
   * Removes up to `limit` records of `trafficClass` whose lastUseAt ≤ `maxLastUseAt`,
   * oldest first, judged and removed in one atomic step per call (a record renewed
   * past the bound before the call stays); tells `onRemoved` subscribers like `remove`.
   * GC's expire walk of a class below now − its longest TTL: every such row is expired,
   * so the page needs no judging and costs one call; it returns keys and summed usage, not records.
   */
  removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch>;
  /** Keys removed with `journal` whose blobs were not yet confirmed deleted. */
  pendingDeletes(): Promise<string[]>;
  clearPendingDeletes(keys: readonly string[]): Promise<void>;
  usage(): Promise<PlaneUsage>;
  /** Notes keys seen on storage without a record at `at`; returns when each was first seen (earliest sighting wins). */
  noteOrphans(keys: readonly string[], at: number): Promise<number[]>;
  /** Forgets orphan sightings (swept, or a record appeared). */
  clearOrphans(keys: readonly string[]): Promise<void>;
  /** Every orphan sighting (key → first seen); GC reconciles it with the listing. */
  orphanSightings(): Promise<Map<string, number>>;
  /** Called with the keys any node removed (purge, GC). Returns an unsubscribe function. */
  onRemoved(listener: (keys: string[]) => void): () => void;
  /** Flushes, then closes. */
  close(): Promise<void>;
}

/** Effective TTL of a record: the policy's for its class and tenant, capped by the record's own hint. */
export function effectiveTtlMs(record: Pick<BlockRecord, 'trafficClass' | 'tenant' | 'ttlMs'>, policyTtlMs: (trafficClass: string, tenant: string) => number): number {
  const ttl = policyTtlMs(record.trafficClass, record.tenant);
  return record.ttlMs > 0 && record.ttlMs < ttl ? record.ttlMs : ttl;
}

/** The usage tags a record counts under: global, class, tenant, and TAIL_TAG for a unit tail. */
export function scopeTagsOf(record: Pick<BlockRecord, 'trafficClass' | 'tenant' | 'kind'>): string[] {
  const tags = ['g', `c:${record.trafficClass}`, `t:${record.tenant}`];
  if (record.kind === 'tail') tags.push(TAIL_TAG);
  return tags;
}
