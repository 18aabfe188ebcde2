/** Where the fs store puts a key (two shard levels) and how it names temp files. Split from fs-blob-store.ts by concern. */
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';

/** Temp names are `<key>~<host>.<pid>.<tag>.<counter>`; `~` is outside the key alphabet. */
export const TEMP_MARK = '~';
const processTag = `${hostname().replace(/[^A-Za-z0-9-]/g, '-').slice(0, 24)}.${process.pid}.${randomBytes(4).toString('hex')}`;
let tempCounter = 0;
export function nextTempSuffix(): string {
  tempCounter = (tempCounter + 1) % Number.MAX_SAFE_INTEGER;
  return `${TEMP_MARK}${processTag}.${tempCounter}`;
}

/** Shard `level` of `key`: two characters, "_"-padded, "." mapped to "_" (so never "." or ".."). */
export function shardSegment(key: string, level: number): string {
  return mapShardChars(key.slice(level * 2, level * 2 + 2).padEnd(2, '_'));
}

export function mapShardChars(part: string): string {
  return part.replaceAll('.', '_');
}
