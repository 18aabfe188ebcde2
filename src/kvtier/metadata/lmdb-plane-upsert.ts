/**
 * The LMDB plane's upsert. Each record is first queued as an insert that LMDB's writer thread runs
 * when the key has no record (the common case: a block just written), counted optimistically in the
 * same transaction. A key that had a record is then merged with it (its creation time kept, the
 * later last use) in a second transaction, which also takes the optimistic count back; with
 * `ifAbsent` it is left as it is.
 *
 * ```
 * turn:   ifNoExists(key) { record, rows } × n   ┐ one write transaction
 *         transaction { counters += n records }  ┘ (queued in one event-loop turn)
 * then, for each insert that found a record:
 *         transaction { counters −= it; merge it into the record (replace) }
 * ```
 *
 * A process that dies between the two transactions leaves the counters high by the records that
 * were present (a race with another writer, or a block rewritten after it expired and before GC
 * removed it): the counters are usage figures, never read to judge a block. The caller checks the
 * plane is open.
 */
import type { Database } from 'lmdb';

import { hexToKeyBytes } from '../prefix-hasher.ts';
import type { LmdbRecordMover } from './lmdb-plane-record-mover.ts';
import type { BlockRecord } from './metadata-plane.ts';

export async function upsertRecords(
  db: Database<Uint8Array, Uint8Array>,
  mover: LmdbRecordMover,
  records: readonly BlockRecord[],
  options: { ifAbsent?: boolean },
): Promise<void> {
  if (records.length === 0) return;
  const given = records.map((record) => (record.lastUseAt >= 0 ? record : { ...record, lastUseAt: 0 }));
  const inserts = given.map((record) => mover.queueInsert(hexToKeyBytes(record.key), record));
  const counted = db.transaction(() => {
    mover.begin();
    for (const record of given) mover.count(record, 1);
    mover.writeCounters();
  });
  const [inserted] = await Promise.all([Promise.all(inserts), counted]);
  const present = given.filter((_, i) => !inserted[i]);
  if (present.length === 0) return;
  await db.transaction(() => {
    mover.begin();
    for (const record of present) {
      mover.count(record, -1);
      const keyBytes = hexToKeyBytes(record.key);
      const existing = mover.read(record.key, keyBytes);
      if (existing !== undefined && options.ifAbsent) continue;
      const next = existing === undefined ? record : { ...record, createdAt: existing.createdAt, lastUseAt: Math.max(existing.lastUseAt, record.lastUseAt) };
      mover.replace(keyBytes, existing, next);
    }
    mover.writeCounters();
  });
}
