/**
 * How the Redis plane names its keys and encodes what it stores: the hash-tagged key names, the
 * last-use score (last use and depth in one double), the record value (`size,created,ttl,depth[,kind]`
 * base 36, kind 1 = unit tail, absent on blocks; NUL class NUL tenant NUL writer) and the 16-byte members.
 */
import { PlaneError } from '../errors.ts';
import type { BlockRecord } from './metadata-plane.ts';

/** Depth bits folded into the score: lastUse × 2048 + (2047 − depth) stays an exact double until 2109. */
export const DEPTH_SLOTS = 2048;

/** Score of a record in the LRU zsets: last use, deeper blocks first among equals. */
export function lruScore(lastUseAt: number, depth: number): number {
  return Math.floor(lastUseAt) * DEPTH_SLOTS + (DEPTH_SLOTS - 1 - Math.min(Math.max(depth, 0), DEPTH_SLOTS - 1));
}

function lastUseOf(score: number): number {
  return Math.floor(score / DEPTH_SLOTS);
}

/** createdAt is kept in seconds since 2025-01-01 (base 36: one or two characters fewer per record than since 1970); earlier times are stored as 2025-01-01. */
const CREATED_EPOCH_S = Date.UTC(2025, 0, 1) / 1000;

/** Every Redis key (and the channel) of one shard of a plane: all carry the shard's hash tag `{<shard>}`. */
export function planeKeyNames(
  prefix: string,
  bucketBits: number,
  shard = 0,
): { gen: string; use: string; classes: string; cap: string; bucket: string; usage: string; orphans: string; pending: string; pendingBatches: string; legacySwept: string; shards: string; removed: string } {
  const tagged = `${prefix}{${shard}}:`;
  return {
    gen: `${tagged}gen`,
    use: `${tagged}u:`,
    classes: `${tagged}classes`,
    cap: `${tagged}cap`,
    bucket: `${tagged}r:${bucketBits}:`,
    usage: `${tagged}usage`,
    orphans: `${tagged}orph`,
    pending: `${tagged}del`,
    pendingBatches: `${tagged}delb`,
    legacySwept: `${tagged}legacy-swept`,
    /** The deployment's shard count (shard 0 only: redis-plane-shards.ts). */
    shards: `${tagged}shards`,
    removed: `${prefix}removed`,
  };
}

export type PlaneKeys = ReturnType<typeof planeKeyNames>;

/** Block keys (hex) of members concatenated 16 bytes each. */
export function splitMembers(members: Buffer): string[] {
  const hex = members.toString('hex');
  const keys: string[] = [];
  for (let i = 0; i < hex.length; i += 32) keys.push(hex.slice(i, i + 32));
  return keys;
}

export function memberOf(key: string): Buffer {
  if (key.length !== 32) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `a block key is 32 hex characters, got ${JSON.stringify(key)}`);
  return Buffer.from(key, 'hex');
}

export function encodeValue(record: BlockRecord): Buffer {
  const n = (value: number) => Math.max(0, Math.floor(value)).toString(36);
  for (const field of [record.trafficClass, record.tenant, record.writer]) {
    if (field.includes('\0')) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `class, tenant and writer must not contain NUL (block ${record.key})`);
  }
  // A unit tail carries a fifth number (kind 1): 2 bytes on tails only, a block's value is unchanged.
  const kind = record.kind === 'tail' ? ',1' : '';
  return Buffer.from(`${n(record.sizeBytes)},${n(record.createdAt / 1000 - CREATED_EPOCH_S)},${n(record.ttlMs)},${n(record.depth)}${kind}\0${record.trafficClass}\0${record.tenant}\0${record.writer}`);
}

export function decodeValue(key: string, value: Buffer, score: number): BlockRecord {
  const text = value.toString('utf8');
  const nul = text.indexOf('\0');
  const numbers = text.slice(0, nul).split(',');
  const names = text.slice(nul + 1).split('\0');
  if ((numbers.length !== 4 && numbers.length !== 5) || names.length !== 3) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `plane record of ${key} is malformed; remove it (GC rebuilds it from storage)`);
  const [size, created, ttl, depth, kind] = numbers.map((value) => parseInt(value, 36));
  const record: BlockRecord = { key, sizeBytes: size, createdAt: (created + CREATED_EPOCH_S) * 1000, ttlMs: ttl, depth, trafficClass: names[0], tenant: names[1], writer: names[2], lastUseAt: lastUseOf(score) };
  if (kind === 1) record.kind = 'tail';
  return record;
}
