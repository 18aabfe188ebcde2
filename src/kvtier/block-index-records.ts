/**
 * What one block index entry holds, and its LMDB record (the layout is drawn on
 * BlockIndex): the value types the index takes and returns, the encoding, and
 * the TTL rule every write applies.
 */
import { KvTierError } from './errors.ts';
import { bytesToHex } from './hex.ts';
import type { RetentionPolicy } from './retention-policy.ts';
import { Utf8Cache } from './utf8-cache.ts';

const names = new Utf8Cache();

/** One block as this node's index knows it. Times are ms since the epoch. */
export interface IndexEntry {
  key: string;
  /** Encoded size on storage; 0 for a block adopted from storage and not read yet. */
  sizeBytes: number;
  trafficClass: string;
  tenant: string;
  createdAt: number;
  lastUseAt: number;
  /** lastUseAt + the class TTL when it was last written or used. */
  expiresAt: number;
  hits: number;
  /** Block number in its prompt (0 = first block). Deeper blocks are evicted first among equals. */
  depth: number;
  /** Client retention hint: expires this long after last use if sooner than the policy TTL. Absent = none. */
  ttlCapMs?: number;
  /** 'tail' for a prefix unit's tail (tier-units.ts; `depth` is then its block count); absent for a block. */
  kind?: 'tail';
}

export interface IndexWrite {
  keyBytes: Uint8Array;
  sizeBytes: number;
  trafficClass: string;
  tenant: string;
  depth: number;
  ttlCapMs?: number;
  /** Its last use, when a batch records writes of different times; default the call's `now`. */
  at?: number;
  kind?: 'tail';
  /** keyBytes as hex when the caller has it (spares the entry's key a conversion per write). */
  key?: string;
}

/** A cluster record to mirror into this node's index (see `adoptRecords`). */
export interface AdoptedRecord {
  keyBytes: Uint8Array;
  sizeBytes: number;
  trafficClass: string;
  tenant: string;
  depth: number;
  createdAt: number;
  lastUseAt: number;
  ttlCapMs: number;
  kind?: 'tail';
}

export const PROBE_ABSENT = -1;
export const PROBE_EXPIRED = -2;

/** A node index probe's answer for a stored block: its last use while live (expiry[0] = its expiry, when given), else PROBE_EXPIRED. `cap` 0 = none. */
export function probeAnswer(lastUse: number, cap: number, policyTtlMs: number, now: number, expiry?: Float64Array): number {
  const expiresAt = lastUse + (cap > 0 && cap < policyTtlMs ? cap : policyTtlMs);
  if (expiresAt <= now) return PROBE_EXPIRED;
  if (expiry !== undefined) expiry[0] = expiresAt;
  return lastUse;
}

/** An entry after its block was put on storage; `existing` is what the index held for it. */
export function writtenEntry(write: IndexWrite, existing: IndexEntry | undefined, now: number, policy: RetentionPolicy): IndexEntry {
  const next: IndexEntry = {
    key: write.key ?? bytesToHex(write.keyBytes),
    sizeBytes: write.sizeBytes,
    trafficClass: existing?.trafficClass ?? write.trafficClass,
    tenant: existing?.tenant ?? write.tenant,
    createdAt: existing?.createdAt ?? now,
    lastUseAt: now,
    expiresAt: 0,
    hits: existing?.hits ?? 0,
    depth: write.depth,
    ttlCapMs: write.ttlCapMs ?? existing?.ttlCapMs,
  };
  if ((write.kind ?? existing?.kind) === 'tail') next.kind = 'tail';
  next.expiresAt = now + ttlOf(next, policy);
  return next;
}

/** A block found on storage but unknown here (written by another node): its size is learnt on first load. */
export function adoptedEntry(write: Omit<IndexWrite, 'sizeBytes'>, now: number, policy: RetentionPolicy): IndexEntry {
  return {
    key: bytesToHex(write.keyBytes),
    sizeBytes: 0,
    trafficClass: write.trafficClass,
    tenant: write.tenant,
    createdAt: now,
    lastUseAt: now,
    expiresAt: now + policy.ttlMs(write.trafficClass, write.tenant),
    hits: 0,
    depth: write.depth,
  };
}

/** A cluster record mirrored into the index: last use only moves forward; class, tenant, size and cap come from the record. */
export function mirroredEntry(record: AdoptedRecord, existing: IndexEntry | undefined, policy: RetentionPolicy): IndexEntry {
  const lastUseAt = Math.max(existing?.lastUseAt ?? 0, record.lastUseAt);
  const next: IndexEntry = {
    key: bytesToHex(record.keyBytes),
    sizeBytes: record.sizeBytes,
    trafficClass: record.trafficClass,
    tenant: record.tenant,
    createdAt: existing?.createdAt ?? record.createdAt,
    lastUseAt,
    expiresAt: 0,
    hits: existing?.hits ?? 0,
    depth: record.depth,
    ttlCapMs: record.ttlCapMs > 0 ? record.ttlCapMs : undefined,
  };
  if ((record.kind ?? existing?.kind) === 'tail') next.kind = 'tail';
  next.expiresAt = lastUseAt + ttlOf(next, policy);
  return next;
}

/** The policy TTL for the entry's class and tenant, capped by its client hint. */
export function ttlOf(entry: Pick<IndexEntry, 'trafficClass' | 'tenant' | 'ttlCapMs'>, policy: RetentionPolicy): number {
  const ttl = policy.ttlMs(entry.trafficClass, entry.tenant);
  return entry.ttlCapMs !== undefined && entry.ttlCapMs > 0 && entry.ttlCapMs < ttl ? entry.ttlCapMs : ttl;
}

/**
 * The LMDB value: expiresAt f64 · lastUseAt f64 · createdAt f64 · sizeBytes f64 ·
 * hits u32 · depth u32 · class length u16 · tenant length u16 · class · tenant,
 * then optional fields told apart by the bytes left (0, 1, 8 or 9):
 * the client TTL cap f64 when ≥ 8 are left, and a kind byte (1 = unit tail)
 * when an odd number is left. Records written before the kind byte read as blocks.
 */
export function encodeRecord(entry: IndexEntry): Buffer {
  const trafficClass = names.of(entry.trafficClass);
  const tenant = names.of(entry.tenant);
  const cap = entry.ttlCapMs !== undefined && entry.ttlCapMs > 0 ? entry.ttlCapMs : 0;
  const tail = entry.kind === 'tail';
  const record = Buffer.allocUnsafe(44 + trafficClass.length + tenant.length + (cap > 0 ? 8 : 0) + (tail ? 1 : 0));
  record.writeDoubleLE(entry.expiresAt, 0);
  record.writeDoubleLE(entry.lastUseAt, 8);
  record.writeDoubleLE(entry.createdAt, 16);
  record.writeDoubleLE(entry.sizeBytes, 24);
  record.writeUInt32LE(Math.min(entry.hits, 0xffffffff), 32);
  record.writeUInt32LE(entry.depth, 36);
  record.writeUInt16LE(trafficClass.length, 40);
  record.writeUInt16LE(tenant.length, 42);
  trafficClass.copy(record, 44);
  tenant.copy(record, 44 + trafficClass.length);
  if (cap > 0) record.writeDoubleLE(cap, 44 + trafficClass.length + tenant.length);
  if (tail) record[record.length - 1] = 1;
  return record;
}

/**
 * A hit on an encoded record, in place (the layout above): last use = max(last use, now), hits + 1,
 * expiry = last use + the TTL. Returns the expiry before and after (the caller moves its expiry row).
 */
export function touchRecord(record: Buffer, now: number, policy: RetentionPolicy): { expiresBefore: number; expiresAt: number } {
  const { trafficClass, tenant } = decodeNames(record);
  const capOffset = 44 + record.readUInt16LE(40) + record.readUInt16LE(42);
  const cap = record.length >= capOffset + 8 ? record.readDoubleLE(capOffset) : 0;
  const expiresBefore = record.readDoubleLE(0);
  const lastUseAt = Math.max(record.readDoubleLE(8), now);
  const expiresAt = lastUseAt + ttlOf({ trafficClass, tenant, ttlCapMs: cap > 0 ? cap : undefined }, policy);
  record.writeDoubleLE(expiresAt, 0);
  record.writeDoubleLE(lastUseAt, 8);
  record.writeUInt32LE(Math.min(record.readUInt32LE(32) + 1, 0xffffffff), 32);
  return { expiresBefore, expiresAt };
}

export function decodeNames(record: Buffer): { trafficClass: string; tenant: string } {
  if (record.length < 44) throw new KvTierError('KVT_ERR_INDEX_BAD_VALUE', 'index record shorter than 44 bytes; delete the index dir to rebuild it from storage');
  const classLength = record.readUInt16LE(40);
  const tenantLength = record.readUInt16LE(42);
  return {
    trafficClass: record.toString('utf8', 44, 44 + classLength),
    tenant: record.toString('utf8', 44 + classLength, 44 + classLength + tenantLength),
  };
}

export function decodeRecord(keyBytes: Uint8Array, record: Buffer): IndexEntry {
  const { trafficClass, tenant } = decodeNames(record);
  const capOffset = 44 + record.readUInt16LE(40) + record.readUInt16LE(42);
  const cap = record.length >= capOffset + 8 ? record.readDoubleLE(capOffset) : 0;
  const tail = (record.length - capOffset) % 8 === 1 && record[record.length - 1] === 1;
  return {
    ...(cap > 0 ? { ttlCapMs: cap } : {}),
    ...(tail ? { kind: 'tail' as const } : {}),
    key: bytesToHex(keyBytes),
    expiresAt: record.readDoubleLE(0),
    lastUseAt: record.readDoubleLE(8),
    createdAt: record.readDoubleLE(16),
    sizeBytes: record.readDoubleLE(24),
    hits: record.readUInt32LE(32),
    depth: record.readUInt32LE(36),
    trafficClass,
    tenant,
  };
}
