/**
 * The LMDB plane's last-use index: the walk (one class's rows, the capped rows, or every class
 * merged into one last-use order), renewals moving rows forward, and the one-time re-index of a
 * plane written before the per-class index. Callers check the plane is open.
 */
import { randomBytes } from 'node:crypto';

import type { Database } from 'lmdb';

import { bytesToHex } from '../hex.ts';
import { hexToKeyBytes } from '../prefix-hasher.ts';
import { mergeClassPages, type ClassScanPage } from './class-scan-merge.ts';
import { classPrefix, classUseRow, decodeRecord, recordClass, recordDepth, recordLastUseAt, recordTtlMs, u64be, useRow } from './lmdb-plane-codec.ts';
import type { BlockRecord, ScanOptions, ScanPage } from './metadata-plane.ts';
import type { PendingRenewal } from './renewal-buffer.ts';

export interface LmdbIndexDbs {
  records: Database<Uint8Array, Uint8Array>;
  /** byClassUse: class-prefixed last-use rows. */
  byUse: Database<Uint8Array, Uint8Array>;
  capped: Database<Uint8Array, Uint8Array>;
  meta: Database<string | number, string>;
}

const EMPTY = new Uint8Array(0);
const ZERO = Buffer.from([0]);
const EMPTY_PREFIX = Buffer.alloc(0);

export function scanByLastUse(dbs: LmdbIndexDbs, options: ScanOptions): ScanPage {
  const limit = options.limit ?? 512;
  if (options.capped) return pageOf(scanIndex(dbs, dbs.capped, EMPTY_PREFIX, options, limit));
  if (options.trafficClass !== undefined) return pageOf(scanIndex(dbs, dbs.byUse, classPrefix(options.trafficClass), options, limit));
  const pages = classesOf(dbs).map((name) => scanIndex(dbs, dbs.byUse, classPrefix(name), options, limit));
  return mergeClassPages(pages, limit, (a, b) => (a < b ? -1 : a > b ? 1 : 0));
}

/** Rows of one index under `prefix` after the cursor; positions are the hex of the row after the prefix (lastUse ‖ ~depth ‖ key: hex order is walk order). */
function scanIndex(dbs: LmdbIndexDbs, db: Database<Uint8Array, Uint8Array>, prefix: Buffer, options: ScanOptions, limit: number): ClassScanPage {
  const start = options.cursor === undefined ? prefix : Buffer.concat([prefix, Buffer.from(options.cursor, 'hex'), ZERO]);
  const end = Buffer.concat([prefix, u64be(options.maxLastUseAt === undefined ? Number.MAX_SAFE_INTEGER : Math.floor(options.maxLastUseAt) + 1)]);
  const rows: ClassScanPage['rows'] = [];
  for (const row of db.getKeys({ start, end, limit, snapshot: false })) {
    const rowKey = Buffer.from(row);
    const keyBytes = rowKey.subarray(prefix.length + 12);
    const value = dbs.records.getBinary(keyBytes);
    rows.push({ position: rowKey.toString('hex', prefix.length), record: value === undefined ? null : decodeRecord(bytesToHex(keyBytes), value) });
  }
  return { rows, more: rows.length === limit };
}

/** Classes with records (from the usage counters). */
function classesOf(dbs: LmdbIndexDbs): string[] {
  const out: string[] = [];
  for (const { key, value } of dbs.meta.getRange({ start: 'n|c:', end: 'n|c;', snapshot: false })) if (Number(value) > 0) out.push(String(key).slice(4));
  return out;
}

function pageOf(page: ClassScanPage): ScanPage {
  const records: BlockRecord[] = [];
  for (const row of page.rows) if (row.record !== null) records.push(row.record);
  // The cursor is the last row read (its record may be gone).
  const last = page.rows[page.rows.length - 1];
  return { records, cursor: page.more && last !== undefined ? last.position : undefined };
}

/** Builds byClassUse from the records (a plane written before it existed) and drops the old all-class index. Inside a transaction only. */
export function reindexByClass(dbs: LmdbIndexDbs, legacyByUse: Database<Uint8Array, Uint8Array>): void {
  for (const db of [dbs.byUse, legacyByUse]) for (const row of [...db.getKeys({ snapshot: false })]) db.remove(row);
  for (const { key, value } of dbs.records.getRange({ snapshot: false })) {
    const record = decodeRecord(bytesToHex(key), value);
    dbs.byUse.put(classUseRow(record.trafficClass, record.lastUseAt, record.depth, key), EMPTY);
  }
}

/** One transaction: each renewal moves the record's last use and its rows forward (never back). */
export async function writeRenewals(dbs: LmdbIndexDbs, batch: Map<string, PendingRenewal>): Promise<void> {
  await dbs.records.transaction(() => {
    for (const [key, { at }] of batch) {
      // A renewal moves only the LRU rows and the record's last use: class, tenant and size (the counters) stay.
      const keyBytes = hexToKeyBytes(key);
      const value = dbs.records.getBinary(keyBytes);
      if (value === undefined) continue;
      const lastUseAt = recordLastUseAt(value);
      if (lastUseAt >= at) continue;
      const depth = recordDepth(value);
      const capped = recordTtlMs(value) > 0;
      const trafficClass = recordClass(value);
      dbs.byUse.remove(classUseRow(trafficClass, lastUseAt, depth, keyBytes));
      dbs.byUse.put(classUseRow(trafficClass, at, depth, keyBytes), EMPTY);
      if (capped) {
        dbs.capped.remove(useRow(lastUseAt, depth, keyBytes));
        dbs.capped.put(useRow(at, depth, keyBytes), EMPTY);
      }
      const next = Buffer.from(value);
      next.writeDoubleLE(at, 0);
      dbs.records.put(keyBytes, next);
    }
  });
}

/** meta "layout": 2 = last-use index per class (byClassUse). */
const LAYOUT = 2;

/**
 * A plane's meta at open, inside a write transaction: a new directory gets a generation (untrusted until
 * GC rebuilds it from storage); a plane written before the per-class index is re-indexed from its records once.
 */
export function initMeta(dbs: LmdbIndexDbs, legacyByUse: Database<Uint8Array, Uint8Array>): void {
  if (dbs.meta.get('generation') === undefined) {
    dbs.meta.put('generation', randomBytes(8).toString('hex'));
    dbs.meta.put('trusted', 0);
  }
  if (dbs.meta.get('layout') !== LAYOUT) {
    reindexByClass(dbs, legacyByUse);
    dbs.meta.put('layout', LAYOUT);
  }
}
