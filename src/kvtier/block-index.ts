import { mkdirSync } from 'node:fs';

import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';

import { adoptedEntry, decodeNames, decodeRecord, encodeRecord, mirroredEntry, PROBE_ABSENT, probeAnswer, touchRecord, ttlOf, writtenEntry, type AdoptedRecord, type IndexEntry, type IndexWrite } from './block-index-records.ts';
import { IndexMeta } from './block-index-meta.ts';
import type { NodeIndex } from './node-index.ts';
import { EMPTY, expiredKeys, expiryRow } from './block-index-rows.ts';
import { KvTierError } from './errors.ts';
import { TAIL_TAG } from './metadata/metadata-plane.ts';
import { hexToKeyBytes } from './prefix-hasher.ts';
import type { QuotaScope, RetentionPolicy } from './retention-policy.ts';

/** usage() tag of the unit tails among the entries (counted in "g", their class and tenant too; not a quota scope): the plane's tag. */
export { TAIL_TAG };

/**
 * This node's LMDB view of the block store: metadata, last use, expiry.
 *
 * ```
 * entries   key16                                     → record (below)
 * byExpiry  u64be expiresAt ‖ key16                   → ∅      (GC: this node's expired entries, pruneLocalIndex)
 * meta      "bytes|<scope>", "count|<scope>", "policyVersion" → number
 *
 * scope: "g" (all), "c:<class>", "t:<tenant>" — each entry counts in all three.
 * record: f64 expiresAt, f64 lastUse, f64 created, f64 size, u32 hits, u32 depth,
 *         u16 classLen, u16 tenantLen, class utf8, tenant utf8 [, f64 ttlCapMs]   (little-endian)
 * ```
 *
 * Invariant: every entry has exactly one byExpiry row matching its record,
 * and the meta counters equal the sums over entries. Every write below keeps
 * it inside one LMDB transaction, so a crash or a concurrent process never
 * sees a half-moved entry; counters move once per transaction (IndexMeta.batched).
 * Reads (probe, iteration) are lock-free snapshots.
 *
 * No LRU ordering here: eviction judges by the metadata plane's last-use
 * index (one for the cluster, gc-evict.ts). The three per-scope byUse rows
 * this index kept until #29 were read by nothing but their own tests and
 * cost 3 of the 5 rows a write put and 6 of the 10 a hit moved; an index
 * that still has them drops the table once at open.
 */
export class BlockIndex implements NodeIndex {
  private constructor(
    private readonly env: RootDatabase,
    private readonly entries: Database<Uint8Array, Uint8Array>,
    private readonly byExpiry: Database<Uint8Array, Uint8Array>,
    private readonly meta: IndexMeta,
    readonly path: string,
  ) {}

  static open(options: { path: string }): BlockIndex {
    let env: RootDatabase;
    try {
      mkdirSync(options.path, { recursive: true });
      // noSync: the index is a cache of what storage holds; after a power
      // loss LMDB stays consistent and at worst forgets recent entries, which
      // lookups re-adopt from storage. Not useWritemap (a put costs about
      // half with it): a process that opens the environment while another
      // writes it died of SIGBUS (test/src/cluster/gc-leader.test.ts).
      env = openLmdb({ path: options.path, noSync: true, maxDbs: 8 });
    } catch (error) {
      throw new KvTierError('KVT_ERR_INDEX_OPEN', `cannot open the LMDB index at ${options.path}: ${(error as Error).message}; check the data dir is writable`, {
        cause: error,
      });
    }
    const binary = { keyEncoding: 'binary', encoding: 'binary' } as const;
    const legacyByUse = env.openDB<Uint8Array, Uint8Array>({ name: 'byUse', ...binary });
    if (legacyByUse.getKeysCount({ limit: 1 }) > 0) legacyByUse.clearSync();
    return new BlockIndex(
      env,
      env.openDB<Uint8Array, Uint8Array>({ name: 'entries', ...binary }),
      env.openDB<Uint8Array, Uint8Array>({ name: 'byExpiry', ...binary }),
      new IndexMeta(env.openDB<number, string>({ name: 'meta' })),
      options.path,
    );
  }

  /**
   * Hot path of lookup: PROBE_ABSENT, PROBE_EXPIRED (under the current
   * policy, whatever expiry was stored), or the entry's last use. When
   * `expiry` is given and the entry is live, expiry[0] receives its expiry
   * under `policy`.
   */
  probe(keyBytes: Uint8Array, now: number, policy: RetentionPolicy, expiry?: Float64Array): number {
    const record = this.entries.getBinaryFast(keyBytes);
    if (record === undefined) return PROBE_ABSENT;
    const lastUse = record.readDoubleLE(8);
    const capOffset = 44 + record.readUInt16LE(40) + record.readUInt16LE(42);
    const cap = record.length >= capOffset + 8 ? record.readDoubleLE(capOffset) : 0;
    if (expiry === undefined && cap === 0 && now - lastUse < policy.minTtlMs) return lastUse;
    const { trafficClass, tenant } = decodeNames(record);
    return probeAnswer(lastUse, cap, policy.ttlMs(trafficClass, tenant), now, expiry);
  }

  get(key: string | Uint8Array): IndexEntry | undefined {
    const keyBytes = typeof key === 'string' ? hexToKeyBytes(key) : key;
    const record = this.entries.getBinary(keyBytes);
    return record === undefined ? undefined : decodeRecord(keyBytes, record);
  }

  /** Inserts or refreshes entries after their blocks were put on storage. */
  recordWrites(writes: readonly IndexWrite[], now: number, policy: RetentionPolicy): Promise<void> {
    return this.entries.transaction(() =>
      // The scope counters move once per batch, not once per block.
      this.meta.batched(() => {
        for (const write of writes) {
          const existing = this.readEntry(write.keyBytes);
          this.replace(write.keyBytes, existing, writtenEntry(write, existing, write.at ?? now, policy));
        }
      }),
    );
  }

  /** Adds blocks found on storage but unknown here (written by another node). Size is learnt on first load. */
  adopt(writes: readonly Omit<IndexWrite, 'sizeBytes'>[], now: number, policy: RetentionPolicy): Promise<number> {
    return this.entries.transaction(() => this.meta.batched(() => {
      let added = 0;
      for (const write of writes) {
        if (this.entries.getBinaryFast(write.keyBytes) !== undefined) continue;
        const entry = adoptedEntry(write, now, policy);
        this.replace(write.keyBytes, undefined, entry);
        added++;
      }
      return added;
    }));
  }

  /**
   * Mirrors cluster records (the metadata plane) into this index: a block
   * this node lacks, or holds as expired, that another node wrote or used.
   * Last use only moves forward; class, tenant, size and cap come from the record.
   */
  adoptRecords(records: readonly AdoptedRecord[], policy: RetentionPolicy): Promise<number> {
    return this.entries.transaction(() => this.meta.batched(() => {
      let changed = 0;
      for (const record of records) {
        const existing = this.readEntry(record.keyBytes);
        const next = mirroredEntry(record, existing, policy);
        this.replace(record.keyBytes, existing, next);
        changed++;
      }
      return changed;
    }));
  }

  /** A hit: last use = now, hits + 1, expiry slides. Missing keys are skipped. */
  touch(keys: readonly Uint8Array[], now: number, policy: RetentionPolicy): Promise<void> {
    // A touch moves no counter, so the record is patched in place (last use, hits, expiry) and its
    // expiry row moved: no entry decoded and re-encoded per hit (#29's replay renews every block it hits).
    return this.entries.transaction(() => {
      for (const keyBytes of keys) {
        // getBinary's copy (never the fast get's shared buffer, nor the map): it is patched and put back.
        const record = this.entries.getBinary(keyBytes);
        if (record === undefined) continue;
        const { expiresBefore, expiresAt } = touchRecord(record, now, policy);
        this.byExpiry.remove(expiryRow(expiresBefore, keyBytes));
        this.byExpiry.put(expiryRow(expiresAt, keyBytes), EMPTY);
        this.entries.put(keyBytes, record);
      }
    });
  }

  /** Records the real size of blocks read from storage (adopted entries start at 0). */
  noteSizes(sizes: readonly { keyBytes: Uint8Array; sizeBytes: number }[]): Promise<void> {
    return this.entries.transaction(() => this.meta.batched(() => {
      for (const { keyBytes, sizeBytes } of sizes) {
        const existing = this.readEntry(keyBytes);
        if (existing === undefined || existing.sizeBytes === sizeBytes) continue;
        this.replace(keyBytes, existing, { ...existing, sizeBytes });
      }
    }));
  }

  /** Removes entries; returns the removed ones (for reports). */
  remove(keys: readonly Uint8Array[]): Promise<IndexEntry[]> {
    return this.entries.transaction(() => this.meta.batched(() => {
      const removed: IndexEntry[] = [];
      for (const keyBytes of keys) {
        const existing = this.readEntry(keyBytes);
        if (existing === undefined) continue;
        this.replace(keyBytes, existing, undefined);
        removed.push(existing);
      }
      return removed;
    }));
  }

  /**
   * Recomputes every entry's expiry under `policy` (after a TTL change) and
   * records the policy version. A full scan, run by GC only when the version
   * moved.
   */
  async reapplyPolicy(policy: RetentionPolicy): Promise<number> {
    let changed = 0;
    const batch: Buffer[] = [];
    const flush = async () => {
      const keys = batch.splice(0);
      changed += await this.entries.transaction(() => {
        let n = 0;
        for (const keyBytes of keys) {
          const existing = this.readEntry(keyBytes);
          if (existing === undefined) continue;
          const expiresAt = existing.lastUseAt + ttlOf(existing, policy);
          if (expiresAt === existing.expiresAt) continue;
          this.replace(keyBytes, existing, { ...existing, expiresAt });
          n++;
        }
        return n;
      });
    };
    for (const key of this.entries.getKeys({ snapshot: false })) {
      batch.push(Buffer.from(key));
      if (batch.length >= 1024) await flush();
    }
    await flush();
    await this.meta.setPolicyVersion(policy.version);
    return changed;
  }

  appliedPolicyVersion(): number | undefined {
    return this.meta.policyVersion;
  }

  /** Keys whose stored expiry is ≤ `now`, oldest first, after `after` (an opaque cursor from the previous batch). */
  expiredBatch(now: number, limit: number, after?: Buffer): { keys: Buffer[]; cursor: Buffer | undefined } {
    return expiredKeys(this.byExpiry, now, limit, after);
  }

  bytesIn(scope: QuotaScope): number {
    return this.meta.bytesIn(scope);
  }

  countIn(scope: QuotaScope): number {
    return this.meta.countIn(scope);
  }

  /** Bytes and blocks per scope tag ("g", "c:chat", "t:acme"; "k:tail": the unit tails among them), from the counters. */
  usage(): { bytes: Record<string, number>; blocks: Record<string, number> } {
    return this.meta.usage();
  }

  /** Every entry (admin views, tests); a full scan. */
  *allEntries(): Generator<IndexEntry> {
    for (const { key, value } of this.entries.getRange({ snapshot: false })) yield decodeRecord(key, Buffer.from(value));
  }

  async close(): Promise<void> {
    await this.env.close();
  }

  private readEntry(keyBytes: Uint8Array): IndexEntry | undefined {
    // The fast get's buffer is valid until the next get: decodeRecord copies every field out of it first.
    const record = this.entries.getBinaryFast(keyBytes);
    return record === undefined ? undefined : decodeRecord(keyBytes, record);
  }

  /** Moves one entry from `before` to `after` (either may be absent) with its secondary rows and counters. Inside a transaction only. */
  private replace(keyBytes: Uint8Array, before: IndexEntry | undefined, after: IndexEntry | undefined): void {
    if (before !== undefined) {
      this.byExpiry.remove(expiryRow(before.expiresAt, keyBytes));
      this.meta.count(before, -1);
    }
    if (after === undefined) {
      this.entries.remove(keyBytes);
      return;
    }
    this.entries.put(keyBytes, encodeRecord(after));
    this.byExpiry.put(expiryRow(after.expiresAt, keyBytes), EMPTY);
    this.meta.count(after, 1);
  }
}
