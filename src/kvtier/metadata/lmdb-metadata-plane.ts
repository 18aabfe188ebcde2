import { mkdirSync } from 'node:fs';

import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';

import { PlaneError } from '../errors.ts';
import { bytesToHex } from '../hex.ts';
import { hexToKeyBytes } from '../prefix-hasher.ts';
import { decodeRecord } from './lmdb-plane-codec.ts';
import { initMeta, scanByLastUse, writeRenewals, type LmdbIndexDbs } from './lmdb-plane-index.ts';
import { forgetKeys, journalKeys, noteOrphans, orphanSightings } from './lmdb-plane-side-tables.ts';
import { LmdbRecordMover } from './lmdb-plane-record-mover.ts';
import { upsertRecords } from './lmdb-plane-upsert.ts';
import { type BlockRecord, type MetadataPlane, type PlaneState, type PlaneUsage, type RemovedBatch, type RemoveOptions, type ScanOptions, type ScanPage } from './metadata-plane.ts';
import { RenewalBuffer } from './renewal-buffer.ts';

export interface LmdbMetadataPlaneOptions {
  /** Directory of the LMDB environment; every process of an embedded deployment opens the same one. */
  path: string;
  /** Renewals buffered before a flush; default 8192. */
  renewBatchKeys?: number;
  /** Longest a renewal waits in the buffer (wall ms); default 1000. */
  renewFlushMs?: number;
}

/**
 * Embedded driver: the plane in an LMDB environment on this host.
 *
 * ```
 * records  key16 → f64 lastUse, f64 created, f64 size, f64 ttlMs, u32 depth,
 *                  u8 classLen, u8 tenantLen, u8 writerLen, u8 flags (bit 0: unit tail), class, tenant, writer
 * byClassUse  u8 classLen ‖ class ‖ u64be lastUse ‖ u32be ~depth ‖ key16 → ∅   (last-use index per class; deeper first among equals)
 * capped   u64be lastUse ‖ u32be ~depth ‖ key16 → ∅, only records with a ttlMs cap
 * orphans  key16 → f64 first seen
 * pendingDeletes  key16 → ∅   (removed by GC, blob not yet confirmed deleted: the journal)
 * meta     "generation", "trusted", "b|<tag>", "n|<tag>" (usage counters; tag k:tail: the unit tails)
 * ```
 *
 * Every change to a record moves its rows and counters in one transaction.
 * Invariant: a record has exactly one row in byClassUse, under its class, so
 * the expire walk of a class reads only that class's rows up to now − its TTL
 * (expired rows); eviction merges the classes (class-scan-merge.ts). A plane
 * written before the per-class index (one `byUse` for all classes) is
 * re-indexed from its records once, at open.
 * LMDB does not lose data by itself, so the generation changes only when the
 * directory is new (a fresh deployment, or one upgraded from before the
 * plane): GC then rebuilds records from the storage listing once.
 */
export class LmdbMetadataPlane implements MetadataPlane {
  readonly kind = 'lmdb';
  private readonly listeners = new Set<(keys: string[]) => void>();
  private readonly renewals: RenewalBuffer;
  private closed = false;
  /** The databases the last-use index code reads and moves (lmdb-plane-index.ts). */
  private readonly indexDbs: LmdbIndexDbs;
  private readonly mover: LmdbRecordMover;
  /** The environment's directory. */
  readonly path: string;

  private constructor(
    private readonly env: RootDatabase,
    private readonly records: Database<Uint8Array, Uint8Array>,
    byUse: Database<Uint8Array, Uint8Array>,
    private readonly legacyByUse: Database<Uint8Array, Uint8Array>,
    capped: Database<Uint8Array, Uint8Array>,
    private readonly orphans: Database<number, Uint8Array>,
    private readonly pending: Database<Uint8Array, Uint8Array>,
    private readonly meta: Database<string | number, string>,
    options: LmdbMetadataPlaneOptions,
  ) {
    this.path = options.path;
    this.indexDbs = { records, byUse, capped, meta };
    this.mover = new LmdbRecordMover(records, byUse, capped, meta);
    this.renewals = new RenewalBuffer(
      (batch) => (this.closed ? Promise.resolve() : writeRenewals(this.indexDbs, batch)),
      () => undefined, // a failed background flush is retried by nothing: renewals are advisory; the next hit renews again
      options.renewBatchKeys ?? 8192,
      options.renewFlushMs ?? 1000,
    );
  }

  static async open(options: LmdbMetadataPlaneOptions): Promise<LmdbMetadataPlane> {
    let env: RootDatabase;
    try {
      mkdirSync(options.path, { recursive: true });
      // noSync like the node index: after a power loss LMDB stays consistent and at worst misses the
      // last renewals (a block then lives a little shorter than hit, never longer than written). No
      // writemap, as there (block-index.ts): every process of a host opens this environment.
      env = openLmdb({ path: options.path, noSync: true, maxDbs: 8 });
    } catch (error) {
      throw new PlaneError('KVT_ERR_PLANE_OPEN', `cannot open the LMDB metadata plane at ${options.path}: ${(error as Error).message}; check the directory is writable`, {
        cause: error,
      });
    }
    const binary = { keyEncoding: 'binary', encoding: 'binary' } as const;
    const plane = new LmdbMetadataPlane(
      env,
      env.openDB<Uint8Array, Uint8Array>({ name: 'records', ...binary }),
      env.openDB<Uint8Array, Uint8Array>({ name: 'byClassUse', ...binary }),
      env.openDB<Uint8Array, Uint8Array>({ name: 'byUse', ...binary }),
      env.openDB<Uint8Array, Uint8Array>({ name: 'capped', ...binary }),
      env.openDB<number, Uint8Array>({ name: 'orphans', keyEncoding: 'binary' }),
      env.openDB<Uint8Array, Uint8Array>({ name: 'pendingDeletes', ...binary }),
      env.openDB<string | number, string>({ name: 'meta' }),
      options,
    );
    await plane.meta.transaction(() => initMeta(plane.indexDbs, plane.legacyByUse));
    return plane;
  }

  /** The stored record of `keyBytes` (lmdb-plane-codec.ts layout), valid until the next read; renewals still buffered are not in it (`renewalAt`). */
  recordBytes(keyBytes: Uint8Array): Buffer | undefined {
    return this.records.getBinaryFast(keyBytes);
  }

  /** The latest renewal of `key` not yet in its record (buffered, or being written), or -1. */
  renewalAt(key: string): number {
    return this.renewals.pendingAt(key);
  }

  /** Whether any renewal is not yet in the records (a reader with only key bytes can skip the hex then). */
  get renewalsHeld(): boolean {
    return this.renewals.holding;
  }

  /** A usage counter ("b|<tag>" bytes, "n|<tag>" records), read now. */
  counter(name: string): number {
    this.assertOpen();
    return Number(this.meta.get(name) ?? 0);
  }

  /** Every record (admin views, purge); a full scan. */
  *allRecords(): Generator<BlockRecord> {
    this.assertOpen();
    for (const { key, value } of this.records.getRange({ snapshot: false })) yield decodeRecord(bytesToHex(key), value);
  }

  async state(): Promise<PlaneState> {
    this.assertOpen();
    return { generation: String(this.meta.get('generation')), trusted: this.meta.get('trusted') === 1 };
  }

  async markTrusted(generation: string): Promise<boolean> {
    this.assertOpen();
    return this.meta.transaction(() => {
      if (String(this.meta.get('generation')) !== generation) return false;
      this.meta.put('trusted', 1);
      return true;
    });
  }

  async get(keys: readonly string[]): Promise<(BlockRecord | null)[]> {
    return this.readRecords(keys);
  }

  /** get(), read now. */
  readRecords(keys: readonly string[]): (BlockRecord | null)[] {
    this.assertOpen();
    return keys.map((key) => {
      const value = this.records.getBinary(hexToKeyBytes(key));
      return value === undefined ? null : decodeRecord(key, value);
    });
  }

  /** The two-transaction upsert of lmdb-plane-upsert.ts: inserts on LMDB's writer thread, a merge for keys that had a record. */
  async upsert(records: readonly BlockRecord[], options: { ifAbsent?: boolean } = {}): Promise<void> {
    this.assertOpen();
    await upsertRecords(this.records, this.mover, records, options);
  }

  renew(keys: readonly string[], at: number, depths?: readonly number[]): void {
    this.assertOpen();
    this.renewals.add(keys, at, depths);
  }

  flush(): Promise<void> {
    return this.renewals.flush();
  }

  async remove(keys: readonly string[], options: RemoveOptions = {}): Promise<BlockRecord[]> {
    this.assertOpen();
    const judged = options.judgedLastUseAt;
    if (judged !== undefined && judged.length !== keys.length) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `remove: ${judged.length} judged last uses for ${keys.length} keys`);
    const removed = await this.records.transaction(() => {
      this.mover.begin();
      const out: BlockRecord[] = [];
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const keyBytes = hexToKeyBytes(key);
        const existing = this.mover.read(key, keyBytes);
        if (existing === undefined) continue;
        // Used again (any node) since its remover judged it: it stays. Checked in the same write transaction as the removal.
        if (judged !== undefined && existing.lastUseAt > judged[i]) continue;
        this.mover.replace(keyBytes, existing, undefined);
        if (options.journal) this.pending.put(keyBytes, EMPTY);
        out.push(existing);
      }
      this.mover.writeCounters();
      return out;
    });
    if (removed.length > 0) {
      const removedKeys = removed.map((record) => record.key);
      for (const listener of this.listeners) listener(removedKeys);
    }
    return removed;
  }

  async removeByLastUse(options: { trafficClass: string; maxLastUseAt: number; limit: number; journal?: boolean }): Promise<RemovedBatch> {
    this.assertOpen();
    const { keys, freed, rows } = await this.records.transaction(() => this.mover.takeByLastUse(options, options.journal ? this.pending : undefined));
    if (keys.length > 0) for (const listener of this.listeners) listener(keys);
    return { keys, freed, more: rows === options.limit };
  }

  async scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    this.assertOpen();
    return scanByLastUse(this.indexDbs, options);
  }

  async pendingDeletes(): Promise<string[]> {
    this.assertOpen();
    return journalKeys(this.pending);
  }

  async clearPendingDeletes(keys: readonly string[]): Promise<void> {
    this.assertOpen();
    await forgetKeys(this.pending, keys);
  }

  async usage(): Promise<PlaneUsage> {
    return this.usageNow();
  }

  /** usage(), read now. */
  usageNow(): PlaneUsage {
    this.assertOpen();
    const bytes: Record<string, number> = {};
    const blocks: Record<string, number> = {};
    for (const { key, value } of this.meta.getRange({ snapshot: false })) {
      const name = String(key);
      const n = Number(value);
      if (n === 0) continue;
      if (name.startsWith('b|')) bytes[name.slice(2)] = n;
      else if (name.startsWith('n|')) blocks[name.slice(2)] = n;
    }
    return { bytes, blocks };
  }

  async noteOrphans(keys: readonly string[], at: number): Promise<number[]> {
    this.assertOpen();
    return noteOrphans(this.orphans, keys, at);
  }

  async clearOrphans(keys: readonly string[]): Promise<void> {
    this.assertOpen();
    await forgetKeys(this.orphans, keys);
  }

  async orphanSightings(): Promise<Map<string, number>> {
    this.assertOpen();
    return orphanSightings(this.orphans);
  }

  onRemoved(listener: (keys: string[]) => void): () => void {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  async close(): Promise<void> {
    if (this.closed) return;
    await this.renewals.flush().catch(() => undefined);
    this.renewals.stop();
    this.closed = true;
    this.listeners.clear();
    await this.env.close();
  }

  // ── internals ──────────────────────────────────────────────────────────

  private assertOpen(): void {
    if (this.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
  }
}

const EMPTY = new Uint8Array(0);
