/**
 * The segment store's on-disk record (segment-blob-store.ts). A segment is a
 * file of records appended by one writer; any node sharing the mount reads
 * it by scanning the records' headers. Little-endian throughout:
 *
 * ```
 * offset  size  field
 *  0      4     magic "KVSR"
 *  4      1     kind: 1 put, 2 tombstone (a delete), 3 sealed (the writer appends no more)
 *  5      1     key length k (0 for sealed, else 1..180, the BlobStore key alphabet)
 *  6      2     0
 *  8      4     value length n (0 unless put)
 * 12      4     CRC-32 of the value
 * 16      8     version (f64): ms since the epoch × 4096 + a per-writer counter; the newest record of a key wins
 * 24      4     CRC-32 of bytes 0..24 and the key (the header check)
 * 28      k     key (ASCII)
 * pad to a multiple of 8, then the value (n bytes), then pad to a multiple of 8
 * ```
 *
 * Invariants:
 * - A record is appended whole by one write of its writer (a batch of
 *   records is one write); nobody rewrites a byte of a segment, and segment
 *   names are never reused, so a (segment, offset) read either finds the
 *   record it was told of or the file is gone (compacted): never other bytes.
 * - A reader trusts a header only if its magic and header CRC match and the
 *   whole record lies below the file size it saw; else the segment ends
 *   there for now (a write still landing, or a torn tail after a crash).
 * - A value is returned only after its CRC matches (get); a mismatch is a
 *   storage fault (KVT_ERR_STORAGE_IO), which kvtier turns into a miss.
 */
import { crc32 } from 'node:zlib';

export const RECORD_MAGIC = 0x5253564b; // "KVSR" little-endian
export const KIND_PUT = 1;
export const KIND_TOMBSTONE = 2;
export const KIND_SEALED = 3;
export const FIXED_HEADER_BYTES = 28;
/** The longest header: fixed part, the longest key, padding. */
export const MAX_HEADER_BYTES = pad8(FIXED_HEADER_BYTES + 180);

export function pad8(n: number): number {
  return (n + 7) & ~7;
}

export function headerBytes(keyLength: number): number {
  return pad8(FIXED_HEADER_BYTES + keyLength);
}

/** Whole record size: header, value, padding. */
export function recordBytes(keyLength: number, valueLength: number): number {
  return headerBytes(keyLength) + pad8(valueLength);
}

export interface RecordHeader {
  kind: number;
  key: string;
  valueLength: number;
  valueCrc: number;
  version: number;
  /** Offset of the value from the record's start. */
  valueOffset: number;
  /** Whole record, padding included. */
  size: number;
}

/** Writes one record (header, value, padding) into `out` at `at`; returns its size. `valueCrc`: crcOf(value). */
export function writeRecord(out: Buffer, at: number, kind: number, key: string, version: number, value: Uint8Array | null, valueCrc: number): number {
  const keyLength = key.length;
  const valueLength = value?.byteLength ?? 0;
  const head = headerBytes(keyLength);
  out.writeUInt32LE(RECORD_MAGIC, at);
  out[at + 4] = kind;
  out[at + 5] = keyLength;
  out.writeUInt16LE(0, at + 6);
  out.writeUInt32LE(valueLength, at + 8);
  out.writeUInt32LE(valueCrc, at + 12);
  out.writeDoubleLE(version, at + 16);
  out.write(key, at + FIXED_HEADER_BYTES, 'latin1');
  out.writeUInt32LE(crc32(out.subarray(at + FIXED_HEADER_BYTES, at + FIXED_HEADER_BYTES + keyLength), crc32(out.subarray(at, at + 24))), at + 24);
  out.fill(0, at + FIXED_HEADER_BYTES + keyLength, at + head);
  if (value !== null) {
    out.set(value, at + head);
    out.fill(0, at + head + valueLength, at + head + pad8(valueLength));
  }
  return head + pad8(valueLength);
}

/**
 * The header at `at` in `chunk`, or null when it is not (yet) a whole, valid
 * header: too few bytes, wrong magic, a bad header CRC. `fileBytesLeft` (bytes
 * of the file from `at` on) must hold the whole record.
 */
export function readHeader(chunk: Uint8Array, at: number, fileBytesLeft: number): RecordHeader | null {
  if (chunk.byteLength - at < FIXED_HEADER_BYTES) return null;
  const view = new DataView(chunk.buffer, chunk.byteOffset + at);
  if (view.getUint32(0, true) !== RECORD_MAGIC) return null;
  const kind = chunk[at + 4];
  const keyLength = chunk[at + 5];
  if (kind < KIND_PUT || kind > KIND_SEALED || (kind !== KIND_SEALED && keyLength === 0) || keyLength > 180) return null;
  const head = headerBytes(keyLength);
  if (chunk.byteLength - at < FIXED_HEADER_BYTES + keyLength) return null;
  const keyBytes = chunk.subarray(at + FIXED_HEADER_BYTES, at + FIXED_HEADER_BYTES + keyLength);
  if (crc32(keyBytes, crc32(chunk.subarray(at, at + 24))) !== view.getUint32(24, true)) return null;
  const valueLength = view.getUint32(8, true);
  if (kind !== KIND_PUT && valueLength !== 0) return null;
  const size = head + pad8(valueLength);
  if (size > fileBytesLeft) return null;
  return {
    kind,
    key: Buffer.from(keyBytes.buffer, keyBytes.byteOffset, keyLength).toString('latin1'),
    valueLength,
    valueCrc: view.getUint32(12, true),
    version: view.getFloat64(16, true),
    valueOffset: head,
    size,
  };
}

/** The value's CRC-32 (0 for none). */
export function crcOf(value: Uint8Array | null): number {
  return value === null ? 0 : crc32(value);
}
