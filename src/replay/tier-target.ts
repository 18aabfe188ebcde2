/**
 * The real tier as a replay target: a KvTier over a BlobStore (fs or S3) with
 * its LMDB index and a metadata plane (LMDB, or Redis with the policy there
 * too), driven by a ManualClock set to each request's trace time.
 *
 * A request is what the serving path does with the cache: lookup (the
 * longest live run, renewing the blocks it hits), then store of the blocks
 * past the hit. Prefill is not run: payloads are a fixed small KV row per
 * token (an `mla` layout of one layer, headDim `payloadHeadDim`), so the
 * stored blocks are real block files of real size for this layout; the
 * report scales stored bytes to a real model by `kvBytesPerToken`.
 *
 * Exactness: expiry is judged at lookup from each block's last use; hits
 * renew every block they touch (touchIntervalMs 0); a stored block's last use
 * is its store call's time, or a later hit's while it was written (the tier's
 * write flights), however late its write lands, so the clock may move on
 * while writes are queued: the replay waits only when MAX_QUEUED_BLOCKS are.
 */
import { join } from 'node:path';

import { openBlobStore, type BlobStore } from '../../storage-adapters/index.ts';
import { KvTier, ManualClock, PrefixHasher, RedisPolicyStore, openMetadataPlane, type KvLayout, type KvNamespace, type MetadataPlane, type PolicyStore, type RetentionPolicyDoc } from '../kvtier/index.ts';
import type { ReplayRequest } from './trace.ts';

/**
 * Block writes queued before the replay waits (for half of them: `relieve`), far below the
 * write-behind budget (WRITE_BEHIND_BYTES), so no write is ever dropped. Waiting for all of them
 * (a flush every 8,192 blocks) left the main thread idle while the last writes landed.
 */
const MAX_QUEUED_BLOCKS = 8192;
const WRITE_BEHIND_BYTES = 1024 * 1024 * 1024;
/**
 * Block puts in flight (a write gives its slot up once its put landed, while
 * it is recorded). The replay writes far faster than a served node, so the
 * write path's batches (one segment append per event-loop turn, one index
 * and plane transaction per record batch) are as large as this lets them be:
 * 256 against 64 gave 787-838 requests/s against 635-689 on the first 3,000
 * conversation requests, 512 and 1,024 no better (bench/RESULTS.md, "replay
 * (#29): fewer allocations per block, a wider write-behind"); with the slot
 * given up at the put, 64 to 1,024 were within this box's noise (replay3).
 */
const WRITE_CONCURRENCY = 256;

export interface TierTargetOptions {
  /** This replay node's directory (LMDB index, embedded plane and policy). */
  dataDir: string;
  /** `fs:<dir>`, `segment:<dir>` (packed segments) or `s3://…`; default fs under dataDir. */
  storage?: string;
  /** Redis for the metadata plane and the policy; absent = embedded LMDB. */
  redisUrl?: string;
  /** Redis key prefix (tests isolate runs). */
  redisKeyPrefix?: string;
  blockTokens: number;
  /** TTL for every class, ms; absent = the stored policy as it is (the policy in force). */
  ttlMs?: number;
  /** Classes the trace uses: added to the policy when missing (at ttlMs, or the longest TTL in force). */
  classes: readonly string[];
  /** Epoch ms of the trace's time 0. */
  epochMs?: number;
  payloadHeadDim?: number;
  /** The tier's `recordBatchMax` (1 = one index transaction and plane call per block; the bench's baseline). */
  recordBatchMax?: number;
  /** The tier's `nodeIndex` (absent = the tier's default, its own LMDB index); 'plane' needs the embedded plane (no redisUrl). */
  nodeIndex?: 'lmdb' | 'plane';
  /** The tier's `fsBatchWrites` (true = native batched file writes; absent = the tier's default, node:fs one file at a time). */
  fsBatchWrites?: boolean;
}

export class TierTarget {
  readonly clock: ManualClock;
  private readonly namespaces = new Map<string, KvNamespace>();
  private readonly payload: Uint8Array;
  readonly layout: KvLayout;

  private constructor(
    readonly tier: KvTier,
    private readonly store: BlobStore,
    private readonly plane: MetadataPlane,
    private readonly policyStore: PolicyStore | null,
    private readonly hasher: PrefixHasher,
    clock: ManualClock,
    private readonly epochMs: number,
    readonly blockTokens: number,
    headDim: number,
  ) {
    this.clock = clock;
    this.layout = { layers: 1, kvHeads: 1, headDim, dtype: 'f16', tokensPerBlock: blockTokens, kind: 'mla' };
    this.payload = new Uint8Array(blockTokens * headDim * 2);
  }

  static async open(options: TierTargetOptions): Promise<TierTarget> {
    const epochMs = options.epochMs ?? Date.UTC(2026, 0, 1);
    const clock = new ManualClock(epochMs);
    const store = await openBlobStore(options.storage ?? `fs:${join(options.dataDir, 'blocks')}`);
    let policyStore: PolicyStore | null = null;
    let plane: MetadataPlane | null = null;
    let tier: KvTier;
    try {
      if (options.redisUrl) policyStore = await RedisPolicyStore.open({ url: options.redisUrl, keyPrefix: options.redisKeyPrefix, clock });
      plane = await openMetadataPlane({ dataDir: options.dataDir, redisUrl: options.redisUrl ?? '', keyPrefix: options.redisKeyPrefix });
      tier = await KvTier.open({
        dataDir: options.dataDir,
        store,
        blockTokens: options.blockTokens,
        clock,
        touchIntervalMs: 0,
        hotCacheBytes: 0,
        readPoolBytes: 0,
        writeConcurrency: WRITE_CONCURRENCY,
        writeBehindMaxBytes: WRITE_BEHIND_BYTES,
        ...(options.recordBatchMax !== undefined ? { recordBatchMax: options.recordBatchMax } : {}),
        ...(options.fsBatchWrites !== undefined ? { fsBatchWrites: options.fsBatchWrites } : {}),
        ...(options.nodeIndex !== undefined ? { nodeIndex: options.nodeIndex } : {}),
        metadataPlane: plane,
        ...(policyStore !== null ? { policyStore } : {}),
      });
    } catch (error) {
      await plane?.close();
      await policyStore?.close();
      await store.close?.();
      throw error;
    }
    await tier.policy.update((doc: RetentionPolicyDoc) => {
      const longest = Math.max(...Object.values(doc.classes).map((c) => c.ttlMs));
      for (const name of options.classes) if (!Object.hasOwn(doc.classes, name)) doc.classes[name] = { ttlMs: options.ttlMs ?? longest };
      if (options.ttlMs !== undefined) {
        for (const spec of Object.values(doc.classes)) spec.ttlMs = options.ttlMs;
        for (const tenant of Object.values(doc.tenants)) delete tenant.ttlMs;
      }
      return doc;
    });
    // A first GC makes a new plane trusted (nothing to rebuild): lookups then judge by its records, not by storage listings.
    await tier.gc();
    return new TierTarget(tier, store, plane, policyStore, await PrefixHasher.create({ blockTokens: options.blockTokens }), clock, epochMs, options.blockTokens, options.payloadHeadDim ?? 1);
  }

  /** TTL of each class in force, ms. */
  ttlByClass(): Record<string, number> {
    const doc = this.tier.policy.current().doc;
    return Object.fromEntries(Object.entries(doc.classes).map(([name, spec]) => [name, spec.ttlMs]));
  }

  /** Waits for the writes queued so far (each records its store call's time, or a later hit's, as its last use). */
  async settle(): Promise<void> {
    await this.tier.flush();
  }

  backlogged(): boolean {
    return this.tier.queuedWrites >= MAX_QUEUED_BLOCKS;
  }

  /** Waits until half the backlog bound is left queued: the writes keep going while the replay waits. */
  async relieve(): Promise<void> {
    await this.tier.writesBelow(MAX_QUEUED_BLOCKS / 2);
  }

  setTime(atMs: number): void {
    this.clock.set(this.epochMs + atMs);
  }

  /** Lookup, then store what missed; returns hit blocks. */
  async serve(request: ReplayRequest, tokens: Uint32Array): Promise<number> {
    let namespace = this.namespaces.get(request.tenant);
    if (namespace === undefined) {
      namespace = this.tier.namespace({ modelFingerprint: 'kvtier-replay', tenantSalt: request.tenant });
      this.namespaces.set(request.tenant, namespace);
    }
    const scope = { tenant: request.tenant, trafficClass: request.trafficClass };
    const chain = this.hasher.chain(namespace.keyBytes, tokens);
    const hit = await this.tier.lookup(namespace, tokens, scope, chain);
    const full = request.blocks.length;
    if (hit.hitBlocks < full) {
      const receipt = this.tier.store({ namespace, tokens, fromBlock: hit.hitBlocks, payloads: new Array<Uint8Array>(full - hit.hitBlocks).fill(this.payload), layout: this.layout, chain: hit.chain, ...scope });
      if (receipt.dropped > 0) throw new Error(`the write-behind queue dropped ${receipt.dropped} blocks: the replay would not be the definition's; lower MAX_QUEUED_BLOCKS`);
    }
    return hit.hitBlocks;
  }

  /**
   * Expires what the policy says is expired (GC), then reads what is stored.
   * No orphan sweep: every write is settled first, so a replay has no orphans,
   * and the sweep lists the whole store (a sample a trace minute made 60
   * listings an hour, most of a replay's time on an fs store).
   */
  async stored(): Promise<{ bytes: number; blocks: number }> {
    await this.tier.flush();
    await this.tier.gc({ sweepOrphans: false });
    const usage = this.tier.usage();
    return { bytes: usage.bytes.g ?? 0, blocks: usage.blocks.g ?? 0 };
  }

  async close(): Promise<void> {
    await this.tier.close();
    await this.plane.close();
    await this.policyStore?.close();
    await this.store.close?.();
  }
}
