import { PROBE_ABSENT, probeAnswer, type AdoptedRecord, type IndexEntry, type IndexWrite } from './block-index-records.ts';
import { scopeTag } from './block-index-rows.ts';
import { KvTierConfigError } from './errors.ts';
import { bytesToHex } from './hex.ts';
import { recordClass, recordLastUseAt, recordTenant, recordTtlMs } from './metadata/lmdb-plane-codec.ts';
import { LmdbMetadataPlane } from './metadata/lmdb-metadata-plane.ts';
import { effectiveTtlMs, type BlockRecord, type MetadataPlane } from './metadata/metadata-plane.ts';
import type { NodeIndex } from './node-index.ts';
import type { QuotaScope, RetentionPolicy } from './retention-policy.ts';

/**
 * The node index as the embedded LMDB plane's own records (`nodeIndex: 'plane'`).
 *
 * With the embedded plane, a `BlockIndex` beside it holds a second copy of
 * every record: a write put a record and an ordered row in each of two
 * environments, and a hit moved both. Here the plane's record is the only
 * one: a lookup probes it, a write is the plane's upsert alone (write-records.ts
 * still calls `recordWrites`, which has nothing left to do), a hit is the
 * plane's renewal alone, GC's expire walk over the plane is the local prune too.
 *
 * ```
 * lookup ─probe─▶ plane record (+ a renewal still buffered: renewalAt) ─▶ last use / PROBE_EXPIRED / PROBE_ABSENT
 * write  ─────────────────────▶ plane.upsert           (recordWrites: nothing)
 * hit    ─────────────────────▶ plane.renew (buffered) (touch: nothing)
 * ```
 *
 * Invariant: a probe answers from the record plus the latest renewal the
 * plane holds for it and has not written yet, so a hit's renewal counts from
 * the moment it is made, as a `BlockIndex` touch does once committed.
 * The plane keeps no hit counts: `hits` reads 0.
 */
export class PlaneIndex implements NodeIndex {
  private policyVersion: number | undefined;

  constructor(
    private readonly plane: LmdbMetadataPlane,
    private readonly policy: () => RetentionPolicy,
  ) {}

  get path(): string {
    return this.plane.path;
  }

  probe(keyBytes: Uint8Array, now: number, policy: RetentionPolicy, expiry?: Float64Array, key?: string): number {
    const record = this.plane.recordBytes(keyBytes);
    if (record === undefined) return PROBE_ABSENT;
    // The record's bytes are valid until the next LMDB read; renewalAt reads none.
    let lastUse = recordLastUseAt(record);
    const cap = recordTtlMs(record);
    if (this.plane.renewalsHeld) lastUse = Math.max(lastUse, this.plane.renewalAt(key ?? bytesToHex(keyBytes)));
    if (expiry === undefined && cap === 0 && now - lastUse < policy.minTtlMs) return lastUse;
    return probeAnswer(lastUse, cap, policy.ttlMs(recordClass(record), recordTenant(record)), now, expiry);
  }

  get(key: string | Uint8Array): IndexEntry | undefined {
    const hex = typeof key === 'string' ? key : bytesToHex(key);
    const [record] = this.plane.readRecords([hex]);
    return record === null ? undefined : this.entryOf(record);
  }

  /** The plane's upsert (write-records.ts) is the record. */
  recordWrites(): Promise<void> {
    return Promise.resolve();
  }

  /** Blocks found on storage and unknown to the plane get a record (writer '', size learnt on first load), as a rebuild gives them. */
  async adopt(writes: readonly Omit<IndexWrite, 'sizeBytes'>[], now: number): Promise<number> {
    const absent = writes.filter((write) => this.plane.recordBytes(write.keyBytes) === undefined);
    if (absent.length === 0) return 0;
    await this.plane.upsert(
      absent.map((write) => ({
        key: write.key ?? bytesToHex(write.keyBytes),
        trafficClass: write.trafficClass,
        tenant: write.tenant,
        sizeBytes: 0,
        writer: '',
        createdAt: now,
        lastUseAt: now,
        ttlMs: write.ttlCapMs !== undefined && write.ttlCapMs > 0 ? Math.floor(write.ttlCapMs) : 0,
        depth: write.depth,
        ...(write.kind === 'tail' ? { kind: 'tail' as const } : {}),
      })),
      { ifAbsent: true },
    );
    return absent.length;
  }

  /** The records are the plane's already. */
  adoptRecords(records: readonly AdoptedRecord[]): Promise<number> {
    return Promise.resolve(records.length);
  }

  /** The plane's renewal (plane-link.ts) is the touch. */
  touch(): Promise<void> {
    return Promise.resolve();
  }

  async noteSizes(sizes: readonly { keyBytes: Uint8Array; sizeBytes: number }[]): Promise<void> {
    const records = this.plane.readRecords(sizes.map(({ keyBytes }) => bytesToHex(keyBytes)));
    const changed: BlockRecord[] = [];
    records.forEach((record, i) => {
      if (record !== null && record.sizeBytes !== sizes[i].sizeBytes) changed.push({ ...record, sizeBytes: sizes[i].sizeBytes });
    });
    if (changed.length > 0) await this.plane.upsert(changed);
  }

  /**
   * Removes the blocks' plane records (a missing blob, a purge); the plane tells every listener, this node's caches included.
   * Keys without a record are left out first: the tier calls this after every plane removal (dropLocal), when the
   * records are already gone, and a read costs less than a write transaction that finds nothing.
   */
  async remove(keys: readonly Uint8Array[]): Promise<IndexEntry[]> {
    const present = keys.filter((keyBytes) => this.plane.recordBytes(keyBytes) !== undefined).map((keyBytes) => bytesToHex(keyBytes));
    if (present.length === 0) return [];
    return (await this.plane.remove(present)).map((record) => this.entryOf(record));
  }

  /** Nothing stored follows the policy: expiry is computed at each read. */
  reapplyPolicy(policy: RetentionPolicy): Promise<number> {
    this.policyVersion = policy.version;
    return Promise.resolve(0);
  }

  appliedPolicyVersion(): number | undefined {
    return this.policyVersion;
  }

  /** GC's expire walk over the plane removes expired records; nothing is left for a local prune. */
  expiredBatch(): { keys: Buffer[]; cursor: Buffer | undefined } {
    return { keys: [], cursor: undefined };
  }

  bytesIn(scope: QuotaScope): number {
    return this.plane.counter(`b|${scopeTag(scope)}`);
  }

  countIn(scope: QuotaScope): number {
    return this.plane.counter(`n|${scopeTag(scope)}`);
  }

  usage(): { bytes: Record<string, number>; blocks: Record<string, number> } {
    return this.plane.usageNow();
  }

  *allEntries(): Generator<IndexEntry> {
    for (const record of this.plane.allRecords()) yield this.entryOf(record);
  }

  /** The plane is its opener's to close. */
  close(): Promise<void> {
    return Promise.resolve();
  }

  private entryOf(record: BlockRecord): IndexEntry {
    const lastUseAt = Math.max(record.lastUseAt, this.plane.renewalAt(record.key));
    const entry: IndexEntry = {
      key: record.key,
      sizeBytes: record.sizeBytes,
      trafficClass: record.trafficClass,
      tenant: record.tenant,
      createdAt: record.createdAt,
      lastUseAt,
      expiresAt: lastUseAt + effectiveTtlMs(record, (trafficClass, tenant) => this.policy().ttlMs(trafficClass, tenant)),
      hits: 0,
      depth: record.depth,
    };
    if (record.ttlMs > 0) entry.ttlCapMs = record.ttlMs;
    if (record.kind === 'tail') entry.kind = 'tail';
    return entry;
  }
}

/** `KvTierOptions.nodeIndex`, checked: 'lmdb' (the default) or 'plane'. */
export function nodeIndexKind(kind: unknown): 'lmdb' | 'plane' {
  if (kind === undefined || kind === 'lmdb' || kind === 'plane') return kind ?? 'lmdb';
  throw new KvTierConfigError('nodeIndex', `nodeIndex must be 'lmdb' or 'plane', got ${String(kind)}`);
}

/** The node index over `plane`'s records; only the embedded LMDB plane has records in this process to read. */
export function planeIndexOf(plane: MetadataPlane, policy: () => RetentionPolicy): PlaneIndex {
  if (!(plane instanceof LmdbMetadataPlane)) {
    throw new KvTierConfigError('nodeIndex', `nodeIndex 'plane' reads the embedded LMDB plane's records, but this tier's plane is ${plane.kind}; use nodeIndex 'lmdb' with a Redis plane`);
  }
  return new PlaneIndex(plane, policy);
}
