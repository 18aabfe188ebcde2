/**
 * The block index's secondary rows (byExpiry, byUse) and their sortable key
 * bytes; the layout is drawn on BlockIndex.
 */
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

