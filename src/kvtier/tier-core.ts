import type { BlobStore } from '../../storage-adapters/index.ts';

import type { BlockCodec } from './block-codec.ts';
import { BlockFlights } from './block-flights.ts';
import type { NodeIndex } from './node-index.ts';
import type { Clock } from './clock.ts';
import { errorCodeOf, KvTierConfigError } from './errors.ts';
import { EncodeBufferPool } from './encode-buffer-pool.ts';
import { HotBlockCache } from './hot-block-cache.ts';
import type { KvTierOptions, KvTierStats, RequestScope, UnitCounters } from './kv-tier-types.ts';
import { LiveEntryCache } from './live-entry-cache.ts';
import { REUSE_GAP_EDGES_MS, ReuseGaps } from './reuse-gaps.ts';
import type { KvTierLogger } from './logger.ts';
import type { PlaneLink } from './plane-link.ts';
import type { PolicyStore } from './policy-store.ts';
import type { PrefixHasher } from './prefix-hasher.ts';
import type { TailCodec } from './tail-codec.ts';
import { ReadBufferPool } from './read-buffer-pool.ts';
import { assertTenantName, type RetentionPolicy } from './retention-policy.ts';
import { WriteBehindQueue } from './write-behind-queue.ts';
import { WriteRecords } from './write-records.ts';

const MIB = 1024 * 1024;
/** Free encode buffers kept: ~10,000 blocks of the #29 replay's 3.2 KB, or a few blocks of a large model. */
const ENCODE_POOL_BYTES = 32 * MIB;

/**
 * What the KvTier's paths share (lookup in tier-lookup.ts, load in
 * tier-load.ts, store in tier-store.ts, the rest in the kv-tier.ts facade):
 * the index and its caches, the write-behind queue, the blocks in flight, counters, and the one
 * way faults are counted (`noteError`) and background index updates kept
 * (`track`, awaited by `flush`).
 */
export class TierCore {
  readonly blobStore: BlobStore;
  readonly blockTokens: number;
  readonly counters: KvTierStats;
  readonly hotCache: HotBlockCache;
  readonly readPool: ReadBufferPool;
  readonly liveEntries: LiveEntryCache;
  /** Encoded blocks' buffers, reused after their write (encode-buffer-pool.ts: who may give one back). */
  readonly encodePool = new EncodeBufferPool(ENCODE_POOL_BYTES);
  readonly writes: WriteBehindQueue;
  readonly background = new Set<Promise<unknown>>();
  /**
   * Blocks in flight on this node, computed through written (block-flights.ts):
   * lookups continue into blocks being written and loads read their bytes, so
   * a request arriving right after the one that computed a prefix reuses it.
   */
  readonly flights = new BlockFlights();
  /** Index and plane records of landed writes, batched per event-loop turn (write-records.ts). */
  readonly writeRecords: WriteRecords;
  /** The what-if's histogram (reuse-gaps.ts), fed by lookups; shared with `counters.reuseGaps`. */
  readonly reuseGaps = new ReuseGaps();
  /** Set by the facade's `open` (plane hook): the node index is a cache in front of it. */
  planeLink!: PlaneLink;
  /** Prefix units (tier-units.ts); the same object as `counters.units`. */
  readonly unitCounters: UnitCounters = { queued: 0, duplicate: 0, dropped: 0, written: 0, bytesWritten: 0, lookups: 0, hits: 0, loaded: 0, loadFailed: 0, hitTokens: 0, tailReads: 0, hotHits: 0 };
  private readonly lastLoggedAt = new Map<string, number>();

  constructor(
    readonly options: KvTierOptions,
    readonly hasher: PrefixHasher,
    readonly codec: BlockCodec,
    readonly tailCodec: TailCodec,
    readonly index: NodeIndex,
    readonly policy: PolicyStore,
    readonly clock: Clock,
    private readonly logger: KvTierLogger,
  ) {
    this.blobStore = options.store;
    this.blockTokens = hasher.blockTokens;
    this.hotCache = new HotBlockCache(options.hotCacheBytes ?? 256 * MIB);
    this.readPool = new ReadBufferPool(options.readPoolBytes ?? 64 * MIB);
    this.liveEntries = new LiveEntryCache(index, options.liveCacheEntries ?? 262_144);
    this.writeRecords = new WriteRecords(this, options.recordBatchMax ?? 256);
    this.writes = new WriteBehindQueue(options.writeBehindMaxBytes ?? 256 * MIB, options.writeConcurrency ?? 4, (error) =>
      this.noteError(error, 'write-behind job threw'),
    );
    this.counters = {
      lookups: 0,
      hitBlocks: 0,
      missBlocks: 0,
      hitTokens: 0,
      missTokens: 0,
      adoptedBlocks: 0,
      loads: 0,
      loadedBlocks: 0,
      loadFailedBlocks: 0,
      hotCacheHits: 0,
      bytesRead: 0,
      bytesWritten: 0,
      blocksWritten: 0,
      writeBehind: { queuedBlocks: 0, queuedBytes: 0, duplicateBlocks: 0, droppedBlocks: 0, droppedBytes: 0 },
      hotCache: { blocks: 0, bytes: 0, budgetBytes: this.hotCache.budgetBytes },
      gc: { runs: 0, expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } },
      errors: {},
      reuseGaps: { edgesMs: REUSE_GAP_EDGES_MS, byClass: this.reuseGaps.byClass },
      units: this.unitCounters,
    };
  }

  assertScope(scope: RequestScope, policy: RetentionPolicy): void {
    try {
      assertTenantName(scope?.tenant);
    } catch (error) {
      throw new KvTierConfigError('tenant', (error as Error).message, 'KVT_ERR_KVTIER_BAD_REQUEST');
    }
    policy.assertClass(scope.trafficClass);
  }

  track(promise: Promise<unknown>, what: string): void {
    const tracked = promise.catch((error: unknown) => this.noteError(error, what));
    this.background.add(tracked);
    void tracked.finally(() => this.background.delete(tracked));
  }

  /** Resolves once every tracked background update has settled (including ones started meanwhile). */
  async settleBackground(): Promise<void> {
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
  }

  /** Counts by code; logs the first of each code per 10 s (a dead store would otherwise log per block). */
  noteError(error: unknown, what: string): void {
    const code = errorCodeOf(error);
    this.counters.errors[code] = (this.counters.errors[code] ?? 0) + 1;
    const now = Date.now();
    if (now - (this.lastLoggedAt.get(code) ?? -Infinity) >= 10_000) {
      this.lastLoggedAt.set(code, now);
      this.logger.warn({ code, err: (error as Error)?.message ?? String(error), count: this.counters.errors[code] }, what);
    }
  }
}
