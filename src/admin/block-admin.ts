/**
 * Block-level admin operations over one node's index and the shared block
 * store: list, inspect, purge, GC. The server runs them on its own handle of
 * the index (same LMDB environment as its cache tier); `kvtier --data-dir`
 * runs them on a data directory with no server.
 *
 * Purge deletes from storage first, then from the index (the order GC uses):
 * a crash in between leaves index entries whose blob is gone, which read as
 * misses and are dropped by the next lookup; the other order could leave a
 * blob that another node adopts.
 */
import { dirname } from 'node:path';

import type { BlobStore } from '../../storage-adapters/index.ts';
import { describeError } from '../errors.ts';
import {
  BlockCodec,
  describeSealed,
  errorCodeOf,
  isKeyHex,
  MAX_BLOCK_READ_BYTES,
  openMetadataPlane,
  purgeFilterProblem,
  purgeIndex,
  purgePlane,
  runGc,
  TailCodec,
  type BlockIndex,
  type Clock,
  type GcReport,
  type IndexEntry,
  type MetadataPlane,
  type RetentionPolicy,
} from '../kvtier/index.ts';
import { AdminError } from './admin-error.ts';
import { inspectTail, isTailFile, MAX_STORED_SUMMARIES, summarizeStored, type SealedOpener } from './block-summary.ts';
import type { AdminProgress, BlockDetail, BlockFilter, BlockListing, PurgeFilter, PurgeReport } from './admin-types.ts';

export interface BlockAdminDeps {
  index: BlockIndex;
  store: BlobStore;
  policy: () => RetentionPolicy;
  clock: Clock;
  /** The cluster metadata plane GC judges by; default: opened per GC run (REDIS_URL, else `<dataDir>/plane` beside the index). */
  plane?: MetadataPlane;
  /** Opens sealed blocks for the listing's stored summaries (the server's keyring and tenant salts); absent: codec of a sealed block unknown. */
  opener?: SealedOpener;
}


export class BlockAdmin {
  private constructor(
    private readonly deps: BlockAdminDeps,
    private readonly codec: BlockCodec,
    private readonly tailCodec: TailCodec,
  ) {}

  static async create(deps: BlockAdminDeps): Promise<BlockAdmin> {
    return new BlockAdmin(deps, await BlockCodec.create(), await TailCodec.create());
  }

  private matches(entry: IndexEntry, filter: BlockFilter, now: number): boolean {
    if (filter.tenant !== undefined && entry.tenant !== filter.tenant) return false;
    if (filter.trafficClass !== undefined && entry.trafficClass !== filter.trafficClass) return false;
    if (filter.olderThanMs !== undefined && now - entry.lastUseAt <= filter.olderThanMs) return false;
    return true;
  }

  private checkClass(filter: BlockFilter): void {
    if (filter.trafficClass !== undefined && !this.deps.policy().hasClass(filter.trafficClass)) {
      throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `unknown class "${filter.trafficClass}"; known: ${Object.keys(this.deps.policy().doc.classes).join(', ')}`, 'class');
    }
  }

  /** Most recently used first. */
  list(filter: BlockFilter & { limit: number }): BlockListing {
    this.checkClass(filter);
    const now = this.deps.clock.now();
    const matching: IndexEntry[] = [];
    let scanned = 0;
    for (const entry of this.deps.index.allEntries()) {
      scanned++;
      if (this.matches(entry, filter, now)) matching.push(entry);
    }
    matching.sort((a, b) => b.lastUseAt - a.lastUseAt || a.depth - b.depth);
    return { blocks: matching.slice(0, filter.limit).map((entry) => ({ ...entry, kind: entry.kind ?? 'block' })), matched: matching.length, scanned };
  }

  /** As `list`, with each of the first MAX_STORED_SUMMARIES blocks' file read: size, encryption, codec, tokens. */
  async listStored(filter: BlockFilter & { limit: number }): Promise<BlockListing> {
    const listing = this.list(filter);
    const blocks: BlockListing['blocks'] = [];
    for (const [i, entry] of listing.blocks.entries()) {
      blocks.push(i < MAX_STORED_SUMMARIES ? { ...entry, stored: await summarizeStored(entry, { store: this.deps.store, codec: this.codec, tailCodec: this.tailCodec, opener: this.deps.opener }) } : entry);
    }
    return { ...listing, blocks };
  }

  async inspect(key: string): Promise<BlockDetail> {
    if (!isKeyHex(key)) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', `"${key}" is not a block key; a key is 32 lowercase hex characters (see kvtier ls)`, 'key');
    const entry = this.deps.index.get(key) ?? null;
    const policy = this.deps.policy();
    const now = this.deps.clock.now();
    // The class TTL, capped by the client's retention hint the block was stored with (recipe/cache-retention.ts).
    const classTtl = entry ? policy.ttlMs(entry.trafficClass, entry.tenant) : null;
    const ttlMs = classTtl !== null && entry?.ttlCapMs ? Math.min(classTtl, entry.ttlCapMs) : classTtl;
    const detail: BlockDetail = {
      key,
      entry,
      ttlMs,
      expiresAt: entry && ttlMs !== null ? entry.lastUseAt + ttlMs : null,
      expired: entry && ttlMs !== null ? entry.lastUseAt + ttlMs <= now : null,
      storage: { present: false },
    };
    let bytes: Uint8Array | null;
    try {
      bytes = await this.deps.store.get(key, { maxBytes: MAX_BLOCK_READ_BYTES });
    } catch (error) {
      detail.storage.problem = { code: errorCodeOf(error), message: describeError(error).message };
      return detail;
    }
    if (bytes === null) {
      if (entry === null) throw new AdminError('KVT_ERR_ADMIN_NOT_FOUND', `no block ${key}: not in this node's index and not on storage`, 'key');
      return detail;
    }
    detail.storage.present = true;
    detail.storage.fileBytes = bytes.byteLength;
    // Encryption at rest: the envelope names its key id; what it holds opens only with the tenant's key, which inspect does not derive.
    const sealed = describeSealed(bytes);
    if (sealed !== null && 'problem' in sealed) {
      detail.storage.verified = false;
      detail.storage.problem = { code: 'KVT_ERR_SEAL_MALFORMED', message: sealed.problem };
      return detail;
    }
    detail.storage.encryption = sealed;
    if (sealed !== null) return detail;
    if (isTailFile(bytes)) return inspectTail(detail, bytes, this.tailCodec);
    try {
      const block = this.codec.decode(bytes);
      detail.storage.verified = block.key === key;
      if (block.key !== key) detail.storage.problem = { code: 'KVT_ERR_BLOCK_KEY_MISMATCH', message: `the file stored under ${key} holds block ${block.key}` };
      detail.storage.header = {
        formatVersion: block.formatVersion,
        modelFingerprint: block.modelFingerprint,
        parentKey: block.parentKey,
        tokenCount: block.tokens.length,
        layout: { ...block.layout, dtype: String(block.layout.dtype) },
        payloadBytes: block.payload.byteLength,
        codec: block.codec,
        storedPayloadBytes: block.storedPayloadBytes,
        firstTokens: Array.from(block.tokens.subarray(0, 16)),
      };
    } catch (error) {
      detail.storage.verified = false;
      detail.storage.problem = { code: errorCodeOf(error), message: describeError(error).message };
    }
    return detail;
  }

  /** Removes every indexed block that matches (as of `at`); `all` is required to purge with no filter. */
  async purge(filter: PurgeFilter, onProgress: (progress: AdminProgress) => void = () => undefined, at = this.deps.clock.now()): Promise<PurgeReport> {
    const problem = purgeFilterProblem(filter);
    if (problem) throw new AdminError('KVT_ERR_ADMIN_BAD_REQUEST', problem.message, problem.field);
    this.checkClass(filter);
    // The cluster's records first (every node hears the removal), then what this node's own index still lists; each block counted once.
    const plane = this.deps.plane ?? (await openMetadataPlane({ dataDir: dirname(this.deps.index.path) }));
    try {
      const counted = new Set<string>();
      const cluster = await purgePlane({ plane, store: this.deps.store }, filter, at, onProgress, counted);
      const own = await purgeIndex(
        { index: this.deps.index, store: this.deps.store },
        filter,
        at,
        (p) => onProgress({ ...p, phase: 'purge', removedBlocks: cluster.removedBlocks + p.removedBlocks, removedBytes: cluster.removedBytes + p.removedBytes, totalBlocks: cluster.matched + (p.totalBlocks ?? 0) }),
        counted,
      );
      return {
        matched: cluster.matched + own.removedBlocks,
        removedBlocks: cluster.removedBlocks + own.removedBlocks,
        removedBytes: cluster.removedBytes + own.removedBytes,
        errors: [...cluster.errors, ...own.errors],
      };
    } finally {
      if (this.deps.plane === undefined) await plane.close();
    }
  }

  /** GC on this handle of the index, under the current policy. */
  async gc(options: { dryRun: boolean }, onProgress: (progress: AdminProgress) => void = () => undefined): Promise<GcReport> {
    const plane = this.deps.plane ?? (await openMetadataPlane({ dataDir: dirname(this.deps.index.path) }));
    try {
      return await runGc(
        { plane, index: this.deps.index, store: this.deps.store, policy: this.deps.policy(), clock: this.deps.clock },
        { dryRun: options.dryRun, onProgress: (p) => onProgress({ ...p }) },
      );
    } finally {
      if (this.deps.plane === undefined) await plane.close();
    }
  }
}
