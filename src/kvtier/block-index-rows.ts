/**
 * The block index's secondary row (byExpiry), its sortable key bytes, and
 * the scope tags its counters use; the layout is drawn on BlockIndex.
 */
import type { Database } from 'lmdb';

import { KEY_BYTES } from './prefix-hasher.ts';
import type { QuotaScope } from './retention-policy.ts';

export const EMPTY = new Uint8Array(0);

export function scopeTag(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}

export function expiryRow(expiresAt: number, keyBytes: Uint8Array): Buffer {
  const row = Buffer.allocUnsafe(8 + KEY_BYTES);
  writeU64BE(row, 0, expiresAt);
  row.set(keyBytes, 8);
  return row;
}

/** Non-negative integer ms as 8 sortable bytes. */
export function writeU64BE(target: Buffer, offset: number, value: number): void {
  const ms = Math.max(0, Math.floor(value));
  target.writeUInt32BE(Math.floor(ms / 2 ** 32), offset);
  target.writeUInt32BE(ms % 2 ** 32, offset + 4);
}

/** The smallest key greater than `key` (for exclusive cursors). */
export function successor(key: Buffer): Buffer {
  return Buffer.concat([key, Buffer.from([0])]);
}


type Rows = Database<Uint8Array, Uint8Array>;

/** byExpiry: keys whose stored expiry is ≤ `now`, oldest first, after the cursor `after`. */
export function expiredKeys(byExpiry: Rows, now: number, limit: number, after?: Buffer): { keys: Buffer[]; cursor: Buffer | undefined } {
  const end = Buffer.alloc(8 + KEY_BYTES, 0xff);
  writeU64BE(end, 0, Math.floor(now));
  const keys: Buffer[] = [];
  let cursor: Buffer | undefined;
  for (const row of byExpiry.getKeys({ start: after === undefined ? Buffer.alloc(0) : successor(after), end, limit, snapshot: false })) {
    const rowKey = Buffer.from(row);
    keys.push(rowKey.subarray(8));
    cursor = rowKey;
  }
  return { keys, cursor };
}
