import { hostname } from 'node:os';
import { join } from 'node:path';

import type { BlobStore } from '../../storage-adapters/index.ts';

import { BlockCodec } from './block-codec.ts';
import { TailCodec } from './tail-codec.ts';
import { loadUnit, type LoadedUnit } from './tier-unit-load.ts';
import { lookupUnit, storeUnit, type UnitHit, type UnitStoreOutcome, type UnitStoreRequest } from './tier-units.ts';
import type { BlockFlights } from './block-flights.ts';
import { BlockIndex } from './block-index.ts';
import { systemClock, type Clock } from './clock.ts';
import { KvTierConfigError, KvTierError } from './errors.ts';
import type { GcOptions, GcReport } from './gc.ts';
import type { KvNamespace, KvTierOptions, KvTierStats, LoadedBlocks, LookupResult, RequestScope, StoreReceipt, StoreRequest } from './kv-tier-types.ts';
import type { MetadataPlane } from './metadata/metadata-plane.ts';
import { openMetadataPlane } from './metadata/open-metadata-plane.ts';
import type { NodeIndex } from './node-index.ts';
import { nodeIndexKind, planeIndexOf } from './plane-index.ts';
import { PlaneLink } from './plane-link.ts';
import { stderrLogger, type KvTierLogger } from './logger.ts';
import { LmdbPolicyStore, type PolicyStore } from './policy-store.ts';
import { BLOCK_FORMAT_VERSION, hexToKeyBytes, PrefixHasher, type NamespaceSpec, type PrefixChain } from './prefix-hasher.ts';
import { purgeIndex, type PurgeFilter, type PurgeProgress, type PurgeResult } from './purge.ts';
import { TierCore } from './tier-core.ts';
import { TierGcRuns } from './tier-gc.ts';
import { loadBlocks } from './tier-load.ts';
import { lookupPrefix } from './tier-lookup.ts';
import { queueStore } from './tier-store.ts';
import { useNativeFsBatches } from './fs-batch-writer.ts';

/**
 * The KV block tier: prefix hashing, verified block load, write-behind store,
 * retention and GC, over any BlobStore.
 *
 * ```
 * lookup(ns, tokens) ──hash──▶ key_0 … key_n ──local LMDB index──▶ hits
 *                                    └─ keys the index lacks ──store.has (windowed)──▶ adopted hits
 * load(lookup) ──hot LRU / store.get──▶ decode + verify (key, parent, tokens, fingerprint, checksums)
 * store(blocks) ──encode──▶ write-behind queue ──store.put──▶ index
 * ```
 *
 * Storage and index faults never throw from lookup/load/store: they count in
 * `stats().errors` and cost a miss. Bad arguments throw typed errors.
 * The paths live beside it: tier-lookup.ts, tier-load.ts, tier-store.ts,
 * over the state they share (tier-core.ts); this class opens, closes,
 * flushes, purges and runs GC.
 */
export class KvTier {
  readonly policy: PolicyStore;
  /** The blob store blocks live in (owned by the caller). */
  readonly blobStore: BlobStore;
  readonly blockTokens: number;
  /** State the lookup, load and store paths share (tier-core.ts). */
  private readonly core: TierCore;
  private readonly gcRuns: TierGcRuns;
  private gcTimer: NodeJS.Timeout | undefined;
  private closed = false;
  private unsubscribePlane: () => void = () => undefined;

  private constructor(
    private readonly options: KvTierOptions,
    hasher: PrefixHasher,
    codec: BlockCodec,
    tailCodec: TailCodec,
    private readonly index: NodeIndex,
    policy: PolicyStore,
    private readonly ownsPolicy: boolean,
    private readonly clock: Clock,
    logger: KvTierLogger,
  ) {
    this.policy = policy;
    this.blobStore = options.store;
    this.blockTokens = hasher.blockTokens;
    this.core = new TierCore(options, hasher, codec, tailCodec, index, policy, clock, logger);
    this.gcRuns = new TierGcRuns(this.core, { index, store: options.store, policy, clock, onRemoved: (keys) => this.dropLocal(keys) });
    if (options.gcIntervalMs !== undefined && options.gcIntervalMs > 0) {
      this.gcTimer = setInterval(() => {
        this.gc().catch((error: unknown) => this.core.noteError(error, 'timed GC failed'));
      }, options.gcIntervalMs);
      this.gcTimer.unref();
    }
  }

  /** Opens the index (and the embedded policy store unless one is given). */
  static async open(options: KvTierOptions): Promise<KvTier> {
    if (typeof options?.dataDir !== 'string' || options.dataDir === '') {
      throw new KvTierConfigError('dataDir', 'KvTier.open needs dataDir (this node\'s index directory), e.g. ./data');
    }
    if (options.store === undefined || typeof options.store.get !== 'function') {
      throw new KvTierConfigError('store', 'KvTier.open needs a BlobStore: await openBlobStore(process.env.KVTIER_STORAGE ?? "fs:./data/blocks")');
    }
    for (const field of ['hotCacheBytes', 'writeBehindMaxBytes', 'touchIntervalMs', 'liveCacheEntries'] as const) {
      const value = options[field];
      if (value !== undefined && (!Number.isFinite(value) || value < 0)) throw new KvTierConfigError(field, `${field} must be a number ≥ 0, got ${value}`);
    }
    if (options.gcIntervalMs !== undefined && (!Number.isInteger(options.gcIntervalMs) || options.gcIntervalMs < 0)) {
      throw new KvTierConfigError('gcIntervalMs', `gcIntervalMs must be a whole number of ms (0 = no timer), got ${options.gcIntervalMs}`);
    }
    for (const field of ['writeConcurrency', 'readConcurrency', 'probeWindow', 'recordBatchMax'] as const) {
      const value = options[field];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) throw new KvTierConfigError(field, `${field} must be a positive integer, got ${value}`);
    }
    const hasher = await PrefixHasher.create({ blockTokens: options.blockTokens, hash128: options.hash128 });
    useNativeFsBatches(options.store, options.fsBatchWrites ?? process.env.KVTIER_FS_BATCH_WRITES === '1');
    const codec = await BlockCodec.create();
    const tailCodec = await TailCodec.create();
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? stderrLogger;
    const onPlane = nodeIndexKind(options.nodeIndex) === 'plane';
    // The node's own LMDB index opens first (a bad data dir fails before anything else opens); on the plane, after it.
    let index: NodeIndex | undefined = onPlane ? undefined : BlockIndex.open({ path: join(options.dataDir, 'index') });
    let policy = options.policyStore;
    const ownsPolicy = policy === undefined;
    let plane = options.metadataPlane;
    try {
      policy ??= await LmdbPolicyStore.open({ path: join(options.dataDir, 'policy'), clock, logger });
      plane ??= await openMetadataPlane({ dataDir: options.dataDir, redisUrl: options.metadataRedisUrl, logger });
      const policyOfIndex = policy;
      index ??= planeIndexOf(plane, () => policyOfIndex.current());
    } catch (error) {
      if (options.metadataPlane === undefined) await plane?.close();
      if (ownsPolicy) await policy?.close();
      await index?.close();
      throw error;
    }
    const tier = new KvTier(options, hasher, codec, tailCodec, index, policy, ownsPolicy, clock, logger);
    tier.attachPlane(plane, options.metadataPlane === undefined);
    return tier;
  }

  /** Blocks in flight on this node, computed through written: the one single-flight registry (block-flights.ts). */
  get flights(): BlockFlights {
    return this.core.flights;
  }

  /** The cluster metadata plane this tier records into (purge, cluster stats). */
  get plane(): MetadataPlane {
    return this.core.planeLink.plane;
  }

  /** A namespace: model fingerprint + tenant salt + block format version. */
  namespace(spec: NamespaceSpec): KvNamespace {
    const keyBytes = this.core.hasher.namespaceKeyBytes(spec);
    return Object.freeze({
      key: Buffer.from(keyBytes).toString('hex'),
      keyBytes,
      modelFingerprint: spec.modelFingerprint,
      tenantSalt: spec.tenantSalt,
      formatVersion: spec.formatVersion ?? BLOCK_FORMAT_VERSION,
    });
  }

  /**
   * Longest run of cached full blocks from the start of `tokens`. Never
   * throws for storage or index faults (they count as errors and end the
   * run); throws KvTierConfigError / PolicyError for bad arguments.
   */
  async lookup(namespace: KvNamespace, tokens: Uint32Array, scope: RequestScope, given?: PrefixChain): Promise<LookupResult> {
    this.assertOpen();
    return lookupPrefix(this.core, namespace, tokens, scope, given);
  }

  /**
   * Reads and verifies the lookup's hits (hot cache first). Every block is
   * checked: its key, parent key, tokens, model fingerprint, layout and
   * checksums. The first failure ends the result there (a contiguous prefix
   * is still returned): a corrupt file is deleted, a hash collision is left
   * for the prefix that owns it, a storage fault is counted. Never throws.
   * With `fromBlock`, only blocks [fromBlock, hits) are read (blocks[0] is
   * block fromBlock).
   */
  async load(lookup: LookupResult, options: { fromBlock?: number } = {}): Promise<LoadedBlocks> {
    this.assertOpen();
    return loadBlocks(this.core, lookup, options);
  }

  /**
   * Queues new full blocks for writing and returns at once. Memory is
   * bounded by `writeBehindMaxBytes`: a block that does not fit is dropped
   * and counted, never waited for. Keys already stored or in flight are
   * skipped. Throws only for bad arguments (checked before anything is queued).
   */
  store(request: StoreRequest): StoreReceipt {
    this.assertOpen();
    return queueStore(this.core, request);
  }

  /** Queues the tail of a prefix unit (tier-units.ts); its blocks are stored with `store`. Throws only for bad arguments. */
  storeUnit(request: UnitStoreRequest): UnitStoreOutcome {
    this.assertOpen();
    return storeUnit(this.core, request);
  }

  /** The longest live unit of `tokens` at a position ≤ maxPosition whose blocks are live too; null: none. Never throws for faults. */
  async lookupUnit(namespace: KvNamespace, tokens: Uint32Array, scope: RequestScope, maxPosition: number, given?: PrefixChain): Promise<UnitHit | null> {
    this.assertOpen();
    return lookupUnit(this.core, namespace, tokens, scope, maxPosition, given);
  }

  /** The unit's verified blocks and tail; null when any fails (a miss). Never throws. */
  async loadUnit(hit: UnitHit): Promise<LoadedUnit | null> {
    this.assertOpen();
    return loadUnit(this.core, hit);
  }

  /**
   * Waits until at most `blocks` block writes are queued or being written (a writer's backpressure:
   * the rest go on meanwhile). Renewals are not flushed: `flush` waits for everything.
   */
  async writesBelow(blocks: number): Promise<void> {
    await this.core.writes.below(blocks);
  }

  /** Block writes queued or being written now. */
  get queuedWrites(): number {
    return this.core.writes.queuedJobs;
  }

  /** Waits until every queued write and index update has finished. */
  async flush(): Promise<void> {
    await this.core.writes.drain();
    await this.core.settleBackground();
    // Plane hook: buffered renewals reach the shared records (other nodes, GC) now rather than within a second.
    await this.core.planeLink.plane.flush().catch((error: unknown) => this.core.noteError(error, 'flushing plane renewals failed'));
  }

  /** Counters since open, plus the current queue and cache sizes. */
  stats(): KvTierStats {
    const snapshot = structuredClone(this.core.counters);
    snapshot.writeBehind.queuedBytes = this.core.writes.queuedBytes;
    snapshot.hotCache = { blocks: this.core.hotCache.size - this.core.hotCache.tails, tails: this.core.hotCache.tails, bytes: this.core.hotCache.usedBytes, budgetBytes: this.core.hotCache.budgetBytes };
    snapshot.readBuffers = { taken: this.core.readPool.counts.taken, reused: this.core.readPool.counts.reused, pooledBytes: this.core.readPool.pooledBytes };
    return snapshot;
  }

  /**
   * Removes the blocks of this node's index that match `filter` (as of `at`,
   * default now) from storage, the index, this node's memory caches and the
   * plane's records of them. Queued writes land first, so none of them
   * reappears after the purge.
   */
  async purge(filter: PurgeFilter, options: { at?: number; onProgress?: (progress: PurgeProgress) => void } = {}): Promise<PurgeResult> {
    this.assertOpen();
    await this.flush();
    const forget = (keys: string[]) => {
      for (const key of keys) {
        this.core.hotCache.delete(key);
        this.core.liveEntries.forget(key);
      }
    };
    // A record left in the plane would make a purged block a hit again (adopted) until a load found its blob gone.
    const forgetRecords = (keys: string[]) => this.core.planeLink.forget(keys).catch((error: unknown) => this.core.noteError(error, 'removing purged blocks from the plane failed'));
    const result = await purgeIndex({ index: this.index, store: this.blobStore, forget, forgetRecords }, filter, options.at ?? this.clock.now(), options.onProgress);
    // The admin side may have purged this index through its own handle first (admin-service.ts:
    // the plane and its index, then this tier), leaving nothing here to match: the memo of live
    // entries and the hot RAM tier would still serve what storage no longer holds.
    this.core.liveEntries.clear();
    this.core.hotCache.deleteWhere((key) => this.index.get(key) === undefined);
    return result;
  }

  /** Blocks and bytes this node's index holds, by scope tag ("g", "c:chat", "t:acme"). */
  usage(): { bytes: Record<string, number>; blocks: Record<string, number> } {
    return this.index.usage();
  }

  /** Runs GC under the current policy (one run at a time; a second call for the same shards joins the first, one for others runs after it). */
  gc(options: GcOptions = {}): Promise<GcReport> {
    this.assertOpen();
    return this.gcRuns.run(options);
  }

  /** Flushes pending writes, then closes the index (and the policy store it opened). The BlobStore stays open. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.gcTimer !== undefined) clearInterval(this.gcTimer);
    await this.flush();
    await this.gcRuns.settled();
    this.closed = true;
    this.core.hotCache.clear();
    this.core.readPool.clear();
    this.core.liveEntries.clear();
    this.core.flights.clear();
    if (this.ownsPolicy) await this.policy.close();
    this.unsubscribePlane();
    await this.core.planeLink.close();
    await this.index.close();
  }

  /** Plane hook: link the plane and drop blocks any node removes from it. */
  private attachPlane(plane: MetadataPlane, owned: boolean): void {
    const core = this.core;
    core.planeLink = new PlaneLink(plane, owned, this.options.nodeId ?? `${hostname()}:${process.pid}`, this.index, (error, what) => core.noteError(error, what), this.options.probeWindow ?? 8);
    this.unsubscribePlane = plane.onRemoved((keys) => this.dropLocal(keys));
  }

  /** Forgets blocks removed from the plane (by this node or another): caches, then this node's index. */
  private dropLocal(keys: readonly string[]): void {
    if (this.closed) return;
    for (const key of keys) {
      this.core.hotCache.delete(key);
      this.core.liveEntries.forget(key);
    }
    this.core.track(this.index.remove(keys.map((key) => hexToKeyBytes(key))), 'index remove after a plane removal failed');
  }

  private assertOpen(): void {
    if (this.closed) throw new KvTierError('KVT_ERR_KVTIER_CLOSED', 'this KvTier is closed; open a new one with KvTier.open');
  }
}
