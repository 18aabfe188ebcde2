/**
 * The frame block files (block-codec.ts) and unit tail files (tail-codec.ts)
 * share, so both are opened and checked by one piece of code:
 *
 * ```
 * off  size  field
 *   0     4  magic
 *   4     2  format version
 *   6     2  fixed header bytes
 *  80     8  payload length (as stored)
 *  88     8  xxh64(payload as stored, seed 0)
 *  96     8  xxh64(bytes [0, payload offset) with this field zeroed)
 * ```
 *
 * The payload starts on a 64-byte boundary and the file ends exactly where
 * the payload does. Why a payload out of a verified AES-GCM envelope skips
 * its XXH64 (and the header's never does): the checksum rule in block-codec.ts.
 */
import { Utf8Cache } from './utf8-cache.ts';
import type { BlockChecksum } from './block-checksum.ts';
import { BlockError } from './errors.ts';
import { bytesToHex } from './hex.ts';

export const PAYLOAD_ALIGNMENT = 64;
export const MAX_FINGERPRINT_BYTES = 4096;

/** One kind of file: how its errors name it and what its header must start with. */
export interface FileFrameKind {
  /** 'block' or 'tail', in every message. */
  noun: string;
  magic: number;
  /** The magic as text, for the "not a kvtier … file" message. */
  magicText: string;
  version: number;
  /** Said after a wrong version (why that file cannot be read). */
  versionNote: string;
  headerBytes: number;
}

/** Throws a BlockError KVT_ERR_BLOCK_MALFORMED naming what is wrong. */
export type Malformed = (what: string) => never;

export function align(value: number, to: number): number {
  return Math.ceil(value / to) * to;
}

/** The model fingerprint as utf8; `bad` refuses one outside 1..MAX_FINGERPRINT_BYTES bytes. */
const fingerprints = new Utf8Cache(64);

export function encodeFingerprint(text: string, bad: Malformed): Uint8Array {
  // Every block a model writes repeats one fingerprint: its bytes are made once (shared: callers copy out of them).
  const fingerprint = fingerprints.of(text);
  if (fingerprint.length === 0 || fingerprint.length > MAX_FINGERPRINT_BYTES) bad(`model fingerprint must be 1..${MAX_FINGERPRINT_BYTES} bytes of utf8`);
  return fingerprint;
}

/** Writes both checksums of a file whose every other byte is in place (the payload's first: the header's covers its field). */
export function writeChecksums(xxh: BlockChecksum, bytes: Uint8Array, view: DataView, payloadOffset: number): void {
  view.setBigUint64(88, xxh.h64Raw(bytes.subarray(payloadOffset), 0n), true);
  view.setBigUint64(96, xxh.h64Raw(bytes.subarray(0, payloadOffset), 0n), true);
}

/** Checks magic, version and that the fixed header is all there; returns a view over the file and its version. */
export function openFrame(bytes: Uint8Array, kind: FileFrameKind, malformed: Malformed): { view: DataView; version: number } {
  const { noun } = kind;
  if (!(bytes instanceof Uint8Array)) throw new BlockError('KVT_ERR_BLOCK_MALFORMED', `a ${noun} must be a Uint8Array`);
  if (bytes.byteLength < 8) throw new BlockError('KVT_ERR_BLOCK_TRUNCATED', `${noun} file is ${bytes.byteLength} bytes, shorter than its magic and version`);
  const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (view.getUint32(0, true) !== kind.magic) throw new BlockError('KVT_ERR_BLOCK_BAD_MAGIC', `not a kvtier ${noun} file (magic "${kind.magicText}" missing)`);
  const version = view.getUint16(4, true);
  if (version !== kind.version) {
    throw new BlockError('KVT_ERR_BLOCK_VERSION', `${noun} format version ${version}; this build reads version ${kind.version} only${kind.versionNote}`);
  }
  if (bytes.byteLength < kind.headerBytes) {
    throw new BlockError('KVT_ERR_BLOCK_TRUNCATED', `${noun} file is ${bytes.byteLength} bytes, shorter than its ${kind.headerBytes}-byte header`);
  }
  if (view.getUint16(6, true) !== kind.headerBytes) malformed('fixed header size');
  return { view, version };
}

/**
 * Checks that the file ends exactly where its payload does and both
 * checksums (the payload's skipped for plaintext out of a verified AES-GCM
 * envelope); returns where the payload ends.
 */
export function checkFramePayload(
  bytes: Uint8Array,
  view: DataView,
  payloadOffset: number,
  frame: { noun: string; xxh: BlockChecksum; malformed: Malformed; authenticatedBy?: 'aes-256-gcm' },
): number {
  const { noun, xxh, malformed } = frame;
  const payloadLength64 = view.getBigUint64(80, true);
  if (payloadLength64 > BigInt(Number.MAX_SAFE_INTEGER)) malformed('payload length');
  const total = payloadOffset + Number(payloadLength64);
  if (bytes.byteLength < total) {
    throw new BlockError('KVT_ERR_BLOCK_TRUNCATED', `${noun} file is ${bytes.byteLength} bytes, its header says ${total}; it was cut short`);
  }
  if (bytes.byteLength > total) malformed(`file is ${bytes.byteLength} bytes but its header says ${total}`);
  const meta = bytes.slice(0, payloadOffset); // small; zero the checksum field on the copy
  meta.fill(0, 96, 104);
  if (xxh.h64Raw(meta, 0n) !== view.getBigUint64(96, true)) {
    throw new BlockError('KVT_ERR_BLOCK_HEADER_CHECKSUM', `${noun} header/tokens checksum mismatch: the file is corrupt`);
  }
  if (frame.authenticatedBy !== 'aes-256-gcm' && xxh.h64Raw(bytes.subarray(payloadOffset, total), 0n) !== view.getBigUint64(88, true)) {
    throw new BlockError('KVT_ERR_BLOCK_PAYLOAD_CHECKSUM', `${noun} payload checksum mismatch: the file is corrupt`);
  }
  return total;
}

/** `count` u32 tokens at `offset`: a view into the file when aligned, else a copy. */
export function tokensAt(bytes: Uint8Array, offset: number, count: number): Uint32Array {
  const absolute = bytes.byteOffset + offset;
  return absolute % 4 === 0 ? new Uint32Array(bytes.buffer, absolute, count) : new Uint32Array(bytes.slice(offset, offset + count * 4).buffer);
}

/** A 16-byte chained key in the header at `offset`, as bytes (a view) and as hex. */
export function keyAt(bytes: Uint8Array, offset: number): { hex: string; bytes: Uint8Array } {
  const key = bytes.subarray(offset, offset + 16);
  return { hex: bytesToHex(key), bytes: key };
}

/** What a file of either kind says of itself: its key, the model fingerprint after the fixed header, its tokens. */
export interface FrameRecord {
  key: string;
  keyBytes: Uint8Array;
  modelFingerprint: string;
  formatVersion: number;
  tokens: Uint32Array;
  /** The whole encoded file. */
  bytes: Uint8Array;
}

export function frameRecord(
  bytes: Uint8Array,
  at: { key: number; fingerprint: number; fingerprintBytes: number; tokens: number; tokenCount: number; version: number },
): FrameRecord {
  const key = keyAt(bytes, at.key);
  return {
    key: key.hex,
    keyBytes: key.bytes,
    modelFingerprint: new TextDecoder().decode(bytes.subarray(at.fingerprint, at.fingerprint + at.fingerprintBytes)),
    formatVersion: at.version,
    tokens: tokensAt(bytes, at.tokens, at.tokenCount),
    bytes,
  };
}
