/**
 * Moves LMDB plane records with their last-use rows and usage counters, inside the caller's write
 * transaction. The counters' deltas are summed over the transaction and each counter row is read
 * and written once at its end (`writeCounters`), not per record.
 */
import type { Database } from 'lmdb';

import { bytesToHex } from '../hex.ts';
import { classPrefix, classUseRow, decodeRecord, encodeRecord, u64be, useRow } from './lmdb-plane-codec.ts';
import { type BlockRecord, type PlaneUsage } from './metadata-plane.ts';
import { ScopeCounterNames } from './scope-counter-names.ts';

const EMPTY = new Uint8Array(0);

export class LmdbRecordMover {
  private readonly deltas = new Map<string, number>();
  private readonly counterNames = new ScopeCounterNames('b', 'n');

  constructor(
    private readonly records: Database<Uint8Array, Uint8Array>,
    private readonly byUse: Database<Uint8Array, Uint8Array>,
    private readonly capped: Database<Uint8Array, Uint8Array>,
    private readonly meta: Database<string | number, string>,
  ) {}

  /** Starts a transaction's moves (forgets deltas of one that failed before writing them). */
  begin(): void {
    this.deltas.clear();
  }

  read(key: string, keyBytes: Uint8Array): BlockRecord | undefined {
    // The fast get's buffer lives until the next get: decodeRecord copies every field out of it first.
    const value = this.records.getBinaryFast(keyBytes);
    return value === undefined ? undefined : decodeRecord(key, value);
  }

  /**
   * Queues `record`'s insert as instructions LMDB's writer thread runs (no JavaScript inside the
   * write transaction): the record and its rows are put only if no record of the key exists then.
   * The counters are not moved: the caller counts the insert (`count`) in a transaction callback
   * queued in the same event-loop turn, which lmdb-js commits in the same transaction, and takes
   * the count back for an insert that resolved false (the key had a record).
   */
  queueInsert(keyBytes: Uint8Array, record: BlockRecord): Promise<boolean> {
    const value = encodeRecord(record);
    const row = classUseRow(record.trafficClass, record.lastUseAt, record.depth, keyBytes);
    const cappedRow = record.ttlMs > 0 ? useRow(record.lastUseAt, record.depth, keyBytes) : null;
    return this.records.ifNoExists(keyBytes, () => {
      this.records.put(keyBytes, value);
      this.byUse.put(row, EMPTY);
      if (cappedRow !== null) this.capped.put(cappedRow, EMPTY);
    });
  }

  /** Adds (`sign` 1) or takes back (−1) one record's bytes and count in this transaction's counter deltas. */
  count(record: Pick<BlockRecord, 'trafficClass' | 'tenant' | 'kind' | 'sizeBytes'>, sign: 1 | -1): void {
    const names = this.counterNames.of(record);
    for (let i = 0; i < names.length; i += 2) {
      this.addCounter(names[i], sign * record.sizeBytes);
      this.addCounter(names[i + 1], sign);
    }
  }

  /** Moves one record (either side may be absent) with its rows and counters. */
  replace(keyBytes: Uint8Array, before: BlockRecord | undefined, after: BlockRecord | undefined): void {
    if (before !== undefined) {
      this.byUse.remove(classUseRow(before.trafficClass, before.lastUseAt, before.depth, keyBytes));
      if (before.ttlMs > 0) this.capped.remove(useRow(before.lastUseAt, before.depth, keyBytes));
      this.count(before, -1);
    }
    if (after === undefined) {
      this.records.remove(keyBytes);
      return;
    }
    this.records.put(keyBytes, encodeRecord(after));
    this.byUse.put(classUseRow(after.trafficClass, after.lastUseAt, after.depth, keyBytes), EMPTY);
    if (after.ttlMs > 0) this.capped.put(useRow(after.lastUseAt, after.depth, keyBytes), EMPTY);
    this.count(after, 1);
  }

  /**
   * GC's expire walk of one class: removes up to `limit` records whose last-use row is at or before
   * `maxLastUseAt` (a row left by a removed record goes too), journaled in `pending` when given.
   * Inside a write transaction; moves the counters.
   */
  takeByLastUse(
    options: { trafficClass: string; maxLastUseAt: number; limit: number },
    pending: Database<Uint8Array, Uint8Array> | undefined,
  ): { keys: string[]; freed: PlaneUsage; rows: number } {
    this.begin();
    const prefix = classPrefix(options.trafficClass);
    const end = Buffer.concat([prefix, u64be(Math.floor(options.maxLastUseAt) + 1)]);
    const removed: string[] = [];
    const taken = [...this.byUse.getKeys({ start: prefix, end, limit: options.limit, snapshot: false })].map((row) => Buffer.from(row));
    for (const row of taken) {
      const keyBytes = row.subarray(prefix.length + 12);
      const key = bytesToHex(keyBytes);
      const existing = this.read(key, keyBytes);
      if (existing === undefined) this.byUse.remove(row);
      else {
        this.replace(keyBytes, existing, undefined);
        pending?.put(keyBytes, EMPTY);
        removed.push(key);
      }
    }
    const freed = this.freed();
    this.writeCounters();
    return { keys: removed, freed, rows: taken.length };
  }

  /** What this transaction's moves took away, per scope tag (a removal batch's tally). */
  freed(): PlaneUsage {
    const usage: PlaneUsage = { bytes: {}, blocks: {} };
    for (const [name, delta] of this.deltas) if (delta !== 0) (name.startsWith('b|') ? usage.bytes : usage.blocks)[name.slice(2)] = -delta;
    return usage;
  }

  writeCounters(): void {
    for (const [name, delta] of this.deltas) if (delta !== 0) this.meta.put(name, Number(this.meta.get(name) ?? 0) + delta);
    this.deltas.clear();
  }

  private addCounter(name: string, delta: number): void {
    if (delta === 0) return;
    this.deltas.set(name, (this.deltas.get(name) ?? 0) + delta);
  }
}
