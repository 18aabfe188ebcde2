/**
 * The block index's secondary rows (byExpiry, byUse) and their sortable key
 * bytes; the layout is drawn on BlockIndex.
 */
import type { Database } from 'lmdb';

import { KEY_BYTES } from './prefix-hasher.ts';
import type { QuotaScope } from './retention-policy.ts';
import type { IndexEntry } from './block-index-records.ts';

export const EMPTY = new Uint8Array(0);

export function scopeTag(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}

export function scopesOf(entry: IndexEntry): string[] {
  return ['g', `c:${entry.trafficClass}`, `t:${entry.tenant}`];
}

export function expiryRow(expiresAt: number, keyBytes: Uint8Array): Buffer {
  const row = Buffer.allocUnsafe(8 + KEY_BYTES);
  writeU64BE(row, 0, expiresAt);
  row.set(keyBytes, 8);
  return row;
}

export function useRow(scope: string, lastUse: number, depth: number, keyBytes: Uint8Array): Buffer {
  const tag = Buffer.from(`${scope}\0`);
  const row = Buffer.allocUnsafe(tag.length + 12 + KEY_BYTES);
  tag.copy(row, 0);
  writeU64BE(row, tag.length, lastUse);
  row.writeUInt32BE(0xffffffff - Math.min(depth, 0xffffffff), tag.length + 8);
  row.set(keyBytes, tag.length + 12);
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

/** byUse: least recently used keys of `scope`, oldest (and deepest) first, after the cursor `after`. */
export function oldestKeys(byUse: Rows, scope: QuotaScope, limit: number, after?: Buffer): { keys: Buffer[]; cursor: Buffer | undefined } {
  const tag = Buffer.from(`${scopeTag(scope)}\0`);
  const start = after === undefined ? tag : successor(after);
  const end = Buffer.from(`${scopeTag(scope)}\x01`);
  const keys: Buffer[] = [];
  let cursor: Buffer | undefined;
  for (const row of byUse.getKeys({ start, end, limit, snapshot: false })) {
    const rowKey = Buffer.from(row);
    keys.push(rowKey.subarray(rowKey.length - KEY_BYTES));
    cursor = rowKey;
  }
  return { keys, cursor };
}
