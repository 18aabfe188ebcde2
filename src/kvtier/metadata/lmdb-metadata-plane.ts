import { randomBytes } from 'node:crypto';
import { mkdirSync } from 'node:fs';

import { open as openLmdb, type Database, type RootDatabase } from 'lmdb';

import { PlaneError } from '../errors.ts';
import { bytesToHex } from '../hex.ts';
import { hexToKeyBytes, KEY_BYTES } from '../prefix-hasher.ts';
import { mergeClassPages, type ClassScanPage } from './class-scan-merge.ts';
import { scopeTagsOf, type BlockRecord, type MetadataPlane, type PlaneState, type PlaneUsage, type RemovedBatch, type RemoveOptions, type ScanOptions, type ScanPage } from './metadata-plane.ts';
import { RenewalBuffer, type PendingRenewal } from './renewal-buffer.ts';

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
 *                  u8 classLen, u8 tenantLen, u8 writerLen, 1 pad, class, tenant, writer
 * byClassUse  u8 classLen ‖ class ‖ u64be lastUse ‖ u32be ~depth ‖ key16 → ∅   (last-use index per class; deeper first among equals)
 * capped   u64be lastUse ‖ u32be ~depth ‖ key16 → ∅, only records with a ttlMs cap
 * orphans  key16 → f64 first seen
 * pendingDeletes  key16 → ∅   (removed by GC, blob not yet confirmed deleted: the journal)
 * meta     "generation", "trusted", "b|<tag>", "n|<tag>" (usage counters)
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
  /** Usage deltas of the transaction in progress, written once at its end (a counter row is read and written once per batch, not per record). */
  private readonly deltas = new Map<string, number>();

  private constructor(
    private readonly env: RootDatabase,
    private readonly records: Database<Uint8Array, Uint8Array>,
    private readonly byUse: Database<Uint8Array, Uint8Array>,
    private readonly legacyByUse: Database<Uint8Array, Uint8Array>,
    private readonly capped: Database<Uint8Array, Uint8Array>,
    private readonly orphans: Database<number, Uint8Array>,
    private readonly pending: Database<Uint8Array, Uint8Array>,
    private readonly meta: Database<string | number, string>,
    options: LmdbMetadataPlaneOptions,
  ) {
    this.renewals = new RenewalBuffer(
      (batch) => this.writeRenewals(batch),
      () => undefined, // a failed background flush is retried by nothing: renewals are advisory; the next hit renews again
      options.renewBatchKeys ?? 8192,
      options.renewFlushMs ?? 1000,
    );
  }

  static async open(options: LmdbMetadataPlaneOptions): Promise<LmdbMetadataPlane> {
    let env: RootDatabase;
    try {
      mkdirSync(options.path, { recursive: true });
      // noSync like the node index: after a power loss LMDB stays consistent
      // and at worst misses the last renewals (a block then lives a little shorter than hit, never longer than written).
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
    await plane.meta.transaction(() => {
      if (plane.meta.get('generation') === undefined) {
        plane.meta.put('generation', randomBytes(8).toString('hex'));
        plane.meta.put('trusted', 0);
      }
      if (plane.meta.get('layout') !== LAYOUT) plane.reindexByClass();
    });
    return plane;
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
    this.assertOpen();
    return keys.map((key) => {
      const value = this.records.getBinary(hexToKeyBytes(key));
      return value === undefined ? null : decodeRecord(key, value);
    });
  }

  async upsert(records: readonly BlockRecord[], options: { ifAbsent?: boolean } = {}): Promise<void> {
    this.assertOpen();
    await this.records.transaction(() => {
      this.deltas.clear();
      for (const record of records) {
        const keyBytes = hexToKeyBytes(record.key);
        const existing = this.readRecord(record.key, keyBytes);
        if (existing !== undefined && options.ifAbsent) continue;
        this.replace(keyBytes, existing, {
          ...record,
          createdAt: existing?.createdAt ?? record.createdAt,
          lastUseAt: Math.max(existing?.lastUseAt ?? 0, record.lastUseAt),
        });
      }
      this.writeCounters();
    });
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
      this.deltas.clear();
      const out: BlockRecord[] = [];
      for (let i = 0; i < keys.length; i++) {
        const key = keys[i];
        const keyBytes = hexToKeyBytes(key);
        const existing = this.readRecord(key, keyBytes);
        if (existing === undefined) continue;
        // Used again (any node) since its remover judged it: it stays. Checked in the same write transaction as the removal.
        if (judged !== undefined && existing.lastUseAt > judged[i]) continue;
        this.replace(keyBytes, existing, undefined);
        if (options.journal) this.pending.put(keyBytes, EMPTY);
        out.push(existing);
      }
      this.writeCounters();
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
    const prefix = classPrefix(options.trafficClass);
    const end = Buffer.concat([prefix, u64be(Math.floor(options.maxLastUseAt) + 1)]);
    const { keys, freed, rows } = await this.records.transaction(() => {
      this.deltas.clear();
      const removed: string[] = [];
      const taken = [...this.byUse.getKeys({ start: prefix, end, limit: options.limit, snapshot: false })].map((row) => Buffer.from(row));
      for (const row of taken) {
        const keyBytes = row.subarray(prefix.length + 12);
        const key = bytesToHex(keyBytes);
        const existing = this.readRecord(key, keyBytes);
        if (existing === undefined) this.byUse.remove(row);
        else {
          this.replace(keyBytes, existing, undefined);
          if (options.journal) this.pending.put(keyBytes, EMPTY);
          removed.push(key);
        }
      }
      // The counters' deltas of this batch are what it freed (negated).
      const usage: PlaneUsage = { bytes: {}, blocks: {} };
      for (const [name, delta] of this.deltas) if (delta !== 0) (name.startsWith('b|') ? usage.bytes : usage.blocks)[name.slice(2)] = -delta;
      this.writeCounters();
      return { keys: removed, freed: usage, rows: taken.length };
    });
    if (keys.length > 0) for (const listener of this.listeners) listener(keys);
    return { keys, freed, more: rows === options.limit };
  }

  async scanByLastUse(options: ScanOptions = {}): Promise<ScanPage> {
    this.assertOpen();
    const limit = options.limit ?? 512;
    if (options.capped) return pageOf(this.scanIndex(this.capped, EMPTY_PREFIX, options, limit));
    if (options.trafficClass !== undefined) return pageOf(this.scanIndex(this.byUse, classPrefix(options.trafficClass), options, limit));
    const pages = this.classes().map((name) => this.scanIndex(this.byUse, classPrefix(name), options, limit));
    return mergeClassPages(pages, limit, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
  }

  /** Rows of one index under `prefix` after the cursor; positions are the hex of the row after the prefix (lastUse ‖ ~depth ‖ key: hex order is walk order). */
  private scanIndex(db: Database<Uint8Array, Uint8Array>, prefix: Buffer, options: ScanOptions, limit: number): ClassScanPage {
    const start = options.cursor === undefined ? prefix : Buffer.concat([prefix, Buffer.from(options.cursor, 'hex'), ZERO]);
    const end = Buffer.concat([prefix, u64be(options.maxLastUseAt === undefined ? Number.MAX_SAFE_INTEGER : Math.floor(options.maxLastUseAt) + 1)]);
    const rows: ClassScanPage['rows'] = [];
    for (const row of db.getKeys({ start, end, limit, snapshot: false })) {
      const rowKey = Buffer.from(row);
      const keyBytes = rowKey.subarray(prefix.length + 12);
      const value = this.records.getBinary(keyBytes);
      rows.push({ position: rowKey.toString('hex', prefix.length), record: value === undefined ? null : decodeRecord(bytesToHex(keyBytes), value) });
    }
    return { rows, more: rows.length === limit };
  }

  /** Classes with records (from the usage counters). */
  private classes(): string[] {
    const out: string[] = [];
    for (const { key, value } of this.meta.getRange({ start: 'n|c:', end: 'n|c;', snapshot: false })) if (Number(value) > 0) out.push(String(key).slice(4));
    return out;
  }

  /** Builds byClassUse from the records (a plane written before it existed) and drops the old all-class index. Inside a transaction only. */
  private reindexByClass(): void {
    for (const db of [this.byUse, this.legacyByUse]) for (const row of [...db.getKeys({ snapshot: false })]) db.remove(row);
    for (const { key, value } of this.records.getRange({ snapshot: false })) {
      const record = decodeRecord(bytesToHex(key), value);
      this.byUse.put(classUseRow(record.trafficClass, record.lastUseAt, record.depth, key), EMPTY);
    }
    this.meta.put('layout', LAYOUT);
  }

  async pendingDeletes(): Promise<string[]> {
    this.assertOpen();
    return [...this.pending.getKeys({ snapshot: false })].map((key) => bytesToHex(key));
  }

  async clearPendingDeletes(keys: readonly string[]): Promise<void> {
    this.assertOpen();
    if (keys.length === 0) return;
    await this.pending.transaction(() => {
      for (const key of keys) this.pending.remove(hexToKeyBytes(key));
    });
  }

  async usage(): Promise<PlaneUsage> {
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
    return this.orphans.transaction(() =>
      keys.map((key) => {
        const keyBytes = hexToKeyBytes(key);
        const seen = this.orphans.get(keyBytes);
        if (seen !== undefined && Number(seen) <= at) return Number(seen);
        this.orphans.put(keyBytes, at);
        return at;
      }),
    );
  }

  async clearOrphans(keys: readonly string[]): Promise<void> {
    this.assertOpen();
    await this.orphans.transaction(() => {
      for (const key of keys) this.orphans.remove(hexToKeyBytes(key));
    });
  }

  async orphanSightings(): Promise<Map<string, number>> {
    this.assertOpen();
    const out = new Map<string, number>();
    for (const { key, value } of this.orphans.getRange({ snapshot: false })) out.set(bytesToHex(key), Number(value));
    return out;
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

  private async writeRenewals(batch: Map<string, PendingRenewal>): Promise<void> {
    if (this.closed) return;
    await this.records.transaction(() => {
      for (const [key, { at }] of batch) {
        // A renewal moves only the LRU rows and the record's last use: class, tenant and size (the counters) stay.
        const keyBytes = hexToKeyBytes(key);
        const value = this.records.getBinary(keyBytes);
        if (value === undefined) continue;
        const lastUseAt = value.readDoubleLE(0);
        if (lastUseAt >= at) continue;
        const depth = value.readUInt32LE(32);
        const capped = value.readDoubleLE(24) > 0;
        const trafficClass = Buffer.from(value.buffer, value.byteOffset + FIXED, value.readUInt8(36)).toString('utf8');
        this.byUse.remove(classUseRow(trafficClass, lastUseAt, depth, keyBytes));
        this.byUse.put(classUseRow(trafficClass, at, depth, keyBytes), EMPTY);
        const before = useRow(lastUseAt, depth, keyBytes);
        const after = useRow(at, depth, keyBytes);
        if (capped) {
          this.capped.remove(before);
          this.capped.put(after, EMPTY);
        }
        const next = Buffer.from(value);
        next.writeDoubleLE(at, 0);
        this.records.put(keyBytes, next);
      }
    });
  }

  private readRecord(key: string, keyBytes: Uint8Array): BlockRecord | undefined {
    const value = this.records.getBinary(keyBytes);
    return value === undefined ? undefined : decodeRecord(key, value);
  }

  /** Moves one record (either side may be absent) with its rows and counters. Inside a transaction only. */
  private replace(keyBytes: Uint8Array, before: BlockRecord | undefined, after: BlockRecord | undefined): void {
    if (before !== undefined) {
      const row = useRow(before.lastUseAt, before.depth, keyBytes);
      this.byUse.remove(classUseRow(before.trafficClass, before.lastUseAt, before.depth, keyBytes));
      if (before.ttlMs > 0) this.capped.remove(row);
      for (const tag of scopeTagsOf(before)) {
        this.addCounter(`b|${tag}`, -before.sizeBytes);
        this.addCounter(`n|${tag}`, -1);
      }
    }
    if (after === undefined) {
      this.records.remove(keyBytes);
      return;
    }
    this.records.put(keyBytes, encodeRecord(after));
    const row = useRow(after.lastUseAt, after.depth, keyBytes);
    this.byUse.put(classUseRow(after.trafficClass, after.lastUseAt, after.depth, keyBytes), EMPTY);
    if (after.ttlMs > 0) this.capped.put(row, EMPTY);
    for (const tag of scopeTagsOf(after)) {
      this.addCounter(`b|${tag}`, after.sizeBytes);
      this.addCounter(`n|${tag}`, 1);
    }
  }

  private addCounter(name: string, delta: number): void {
    if (delta === 0) return;
    this.deltas.set(name, (this.deltas.get(name) ?? 0) + delta);
  }

  private writeCounters(): void {
    for (const [name, delta] of this.deltas) if (delta !== 0) this.meta.put(name, Number(this.meta.get(name) ?? 0) + delta);
    this.deltas.clear();
  }

  private assertOpen(): void {
    if (this.closed) throw new PlaneError('KVT_ERR_PLANE_CLOSED', 'this metadata plane is closed; open a new one');
  }
}

const EMPTY = new Uint8Array(0);
const ZERO = Buffer.from([0]);
const EMPTY_PREFIX = Buffer.alloc(0);
/** meta "layout": 2 = last-use index per class (byClassUse). */
const LAYOUT = 2;

function classPrefix(trafficClass: string): Buffer {
  const name = Buffer.from(trafficClass);
  return Buffer.concat([Buffer.from([name.length]), name]);
}

function classUseRow(trafficClass: string, lastUse: number, depth: number, keyBytes: Uint8Array): Buffer {
  return Buffer.concat([classPrefix(trafficClass), useRow(lastUse, depth, keyBytes)]);
}

function pageOf(page: ClassScanPage): ScanPage {
  const records: BlockRecord[] = [];
  for (const row of page.rows) if (row.record !== null) records.push(row.record);
  // The cursor is the last row read (its record may be gone).
  const last = page.rows[page.rows.length - 1];
  return { records, cursor: page.more && last !== undefined ? last.position : undefined };
}

function u64be(value: number): Buffer {
  const out = Buffer.allocUnsafe(8);
  const ms = Math.max(0, Math.floor(value));
  out.writeUInt32BE(Math.floor(ms / 2 ** 32), 0);
  out.writeUInt32BE(ms % 2 ** 32, 4);
  return out;
}

function useRow(lastUse: number, depth: number, keyBytes: Uint8Array): Buffer {
  const row = Buffer.allocUnsafe(12 + KEY_BYTES);
  u64be(lastUse).copy(row, 0);
  row.writeUInt32BE(0xffffffff - Math.min(Math.max(depth, 0), 0xffffffff), 8);
  row.set(keyBytes, 12);
  return row;
}

const FIXED = 40;

function encodeRecord(record: BlockRecord): Buffer {
  const trafficClass = Buffer.from(record.trafficClass);
  const tenant = Buffer.from(record.tenant);
  const writer = Buffer.from(record.writer);
  if (trafficClass.length > 255 || tenant.length > 255 || writer.length > 255) {
    throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `class, tenant and writer must be ≤ 255 bytes each (block ${record.key})`);
  }
  const out = Buffer.allocUnsafe(FIXED + trafficClass.length + tenant.length + writer.length);
  out.writeDoubleLE(record.lastUseAt, 0);
  out.writeDoubleLE(record.createdAt, 8);
  out.writeDoubleLE(record.sizeBytes, 16);
  out.writeDoubleLE(record.ttlMs, 24);
  out.writeUInt32LE(Math.min(Math.max(record.depth, 0), 0xffffffff), 32);
  out.writeUInt8(trafficClass.length, 36);
  out.writeUInt8(tenant.length, 37);
  out.writeUInt8(writer.length, 38);
  out.writeUInt8(0, 39);
  trafficClass.copy(out, FIXED);
  tenant.copy(out, FIXED + trafficClass.length);
  writer.copy(out, FIXED + trafficClass.length + tenant.length);
  return out;
}

function decodeRecord(key: string, value: Uint8Array): BlockRecord {
  const buf = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (buf.length < FIXED) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `plane record of ${key} is ${buf.length} bytes (< ${FIXED}); remove the plane dir to rebuild it from storage`);
  const c = buf.readUInt8(36);
  const t = buf.readUInt8(37);
  const w = buf.readUInt8(38);
  return {
    key,
    lastUseAt: buf.readDoubleLE(0),
    createdAt: buf.readDoubleLE(8),
    sizeBytes: buf.readDoubleLE(16),
    ttlMs: buf.readDoubleLE(24),
    depth: buf.readUInt32LE(32),
    trafficClass: buf.toString('utf8', FIXED, FIXED + c),
    tenant: buf.toString('utf8', FIXED + c, FIXED + c + t),
    writer: buf.toString('utf8', FIXED + c + t, FIXED + c + t + w),
  };
}
