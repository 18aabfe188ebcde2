/**
 * The LMDB plane's per-key side tables: orphan sightings (blob seen on storage without a record →
 * first seen) and the pending-delete journal (removed by GC, blob not yet confirmed deleted).
 */
import type { Database } from 'lmdb';

import { bytesToHex } from '../hex.ts';
import { hexToKeyBytes } from '../prefix-hasher.ts';

/** Earliest sighting wins; returns the first sighting per key. */
export function noteOrphans(orphans: Database<number, Uint8Array>, keys: readonly string[], at: number): Promise<number[]> {
  return orphans.transaction(() =>
    keys.map((key) => {
      const keyBytes = hexToKeyBytes(key);
      const seen = orphans.get(keyBytes);
      if (seen !== undefined && Number(seen) <= at) return Number(seen);
      orphans.put(keyBytes, at);
      return at;
    }),
  );
}

export function orphanSightings(orphans: Database<number, Uint8Array>): Map<string, number> {
  const out = new Map<string, number>();
  for (const { key, value } of orphans.getRange({ snapshot: false })) out.set(bytesToHex(key), Number(value));
  return out;
}

export function journalKeys(pending: Database<Uint8Array, Uint8Array>): string[] {
  return [...pending.getKeys({ snapshot: false })].map((key) => bytesToHex(key));
}

/** Removes `keys` from a per-key table (orphan sightings, the journal) in one transaction. */
export async function forgetKeys(db: Database<number, Uint8Array> | Database<Uint8Array, Uint8Array>, keys: readonly string[]): Promise<void> {
  if (keys.length === 0) return;
  await db.transaction(() => {
    for (const key of keys) db.remove(hexToKeyBytes(key));
  });
}
