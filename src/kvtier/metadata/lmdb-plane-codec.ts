/**
 * How the LMDB plane lays out its rows: the record value (fixed little-endian numbers, a flags byte
 * (bit 0: unit tail), then class, tenant and writer) and the last-use index rows (big-endian last use, inverted depth, key: byte
 * order is walk order), prefixed by the class in the per-class index.
 */
import { writeU64BE } from '../block-index-rows.ts';
import { PlaneError } from '../errors.ts';
import { KEY_BYTES } from '../prefix-hasher.ts';
import { Utf8Cache } from '../utf8-cache.ts';
import type { BlockRecord } from './metadata-plane.ts';

/** Class, tenant and writer bytes, made once per string: every record and row of a write repeats them. */
const names = new Utf8Cache();

export function classPrefix(trafficClass: string): Buffer {
  const name = names.of(trafficClass);
  return Buffer.concat([Buffer.from([name.length]), name]);
}

/** classPrefix ‖ useRow in one buffer (a row per write and two per renewal: one allocation each, not six). */
export function classUseRow(trafficClass: string, lastUse: number, depth: number, keyBytes: Uint8Array): Buffer {
  const name = names.of(trafficClass);
  const row = Buffer.allocUnsafe(1 + name.length + 12 + KEY_BYTES);
  row[0] = name.length;
  name.copy(row, 1);
  writeUseRow(row, 1 + name.length, lastUse, depth, keyBytes);
  return row;
}

export function u64be(value: number): Buffer {
  const out = Buffer.allocUnsafe(8);
  writeU64BE(out, 0, value);
  return out;
}

export function useRow(lastUse: number, depth: number, keyBytes: Uint8Array): Buffer {
  const row = Buffer.allocUnsafe(12 + KEY_BYTES);
  writeUseRow(row, 0, lastUse, depth, keyBytes);
  return row;
}

function writeUseRow(row: Buffer, at: number, lastUse: number, depth: number, keyBytes: Uint8Array): void {
  writeU64BE(row, at, lastUse);
  row.writeUInt32BE(0xffffffff - Math.min(Math.max(depth, 0), 0xffffffff), at + 8);
  row.set(keyBytes, at + 12);
}

export const FIXED = 40;

/** A stored record's last use, read in place (a probe or a renewal takes a few fields without decoding the record). */
export function recordLastUseAt(buf: Buffer): number {
  return buf.readDoubleLE(0);
}

/** A stored record's client TTL cap, read in place; 0 = none. */
export function recordTtlMs(buf: Buffer): number {
  return buf.readDoubleLE(24);
}

export function recordDepth(buf: Buffer): number {
  return buf.readUInt32LE(32);
}

export function recordClass(buf: Buffer): string {
  return buf.toString('utf8', FIXED, FIXED + buf[36]);
}

export function recordTenant(buf: Buffer): string {
  return buf.toString('utf8', FIXED + buf[36], FIXED + buf[36] + buf[37]);
}

/** Byte 39 of a record: flags (bit 0: a unit tail); 0 in records written before the kind, which read as blocks. */
const FLAGS_AT = 39;
const FLAG_TAIL = 1;

export function encodeRecord(record: BlockRecord): Buffer {
  const trafficClass = names.of(record.trafficClass);
  const tenant = names.of(record.tenant);
  const writer = names.of(record.writer);
  if (trafficClass.length > 255 || tenant.length > 255 || writer.length > 255) {
    throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `class, tenant and writer must be ≤ 255 bytes each (block ${record.key})`);
  }
  const out = Buffer.allocUnsafe(FIXED + trafficClass.length + tenant.length + writer.length);
  out.writeDoubleLE(record.lastUseAt, 0);
  out.writeDoubleLE(record.createdAt, 8);
  out.writeDoubleLE(record.sizeBytes, 16);
  out.writeDoubleLE(record.ttlMs, 24);
  out.writeUInt32LE(Math.min(Math.max(record.depth, 0), 0xffffffff), 32);
  out.writeUInt8(trafficClass.length, 36);
  out.writeUInt8(tenant.length, 37);
  out.writeUInt8(writer.length, 38);
  out.writeUInt8(record.kind === 'tail' ? FLAG_TAIL : 0, FLAGS_AT);
  trafficClass.copy(out, FIXED);
  tenant.copy(out, FIXED + trafficClass.length);
  writer.copy(out, FIXED + trafficClass.length + tenant.length);
  return out;
}

export function decodeRecord(key: string, value: Uint8Array): BlockRecord {
  const buf = Buffer.isBuffer(value) ? value : Buffer.from(value.buffer, value.byteOffset, value.byteLength);
  if (buf.length < FIXED) throw new PlaneError('KVT_ERR_PLANE_BAD_RECORD', `plane record of ${key} is ${buf.length} bytes (< ${FIXED}); remove the plane dir to rebuild it from storage`);
  const c = buf.readUInt8(36);
  const t = buf.readUInt8(37);
  const w = buf.readUInt8(38);
  return {
    ...((buf.readUInt8(FLAGS_AT) & FLAG_TAIL) !== 0 ? { kind: 'tail' as const } : {}),
    key,
    lastUseAt: buf.readDoubleLE(0),
    createdAt: buf.readDoubleLE(8),
    sizeBytes: buf.readDoubleLE(16),
    ttlMs: buf.readDoubleLE(24),
    depth: buf.readUInt32LE(32),
    trafficClass: buf.toString('utf8', FIXED, FIXED + c),
    tenant: buf.toString('utf8', FIXED + c, FIXED + c + t),
    writer: buf.toString('utf8', FIXED + c + t, FIXED + c + t + w),
  };
}
