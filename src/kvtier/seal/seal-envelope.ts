import { SealError } from './seal-errors.ts';

/**
 * The envelope around an encoded block on storage, version 1. All integers
 * little-endian.
 *
 * ```
 * off  size  field
 *   0     4  magic "KVTS" (a plaintext block starts "KVTB")
 *   4     1  envelope version (1)
 *   5     1  algorithm (1 = AES-256-GCM, key = HKDF-SHA256(keyring secret, tenant salt))
 *   6     2  header bytes (64)
 *   8     4  key id (u32, from the keyring)
 *  12    12  nonce: 8-byte per-sealer random prefix ‖ u32 counter
 *  24     1  content: 0 a block file, 1 a unit tail file (tail-codec.ts), so a
 *            rebuild from the storage listing tells them apart without the key
 *  25    39  zero (reserved)
 *  64     …  ciphertext of the encoded block (same length)
 * end-16 16  GCM tag
 *
 * associated data = header bytes [0, 64) ‖ the 16-byte block key the blob is stored under
 * ```
 *
 * The header is padded to 64 bytes so a block decrypted in place (the load
 * path) sits on the same 64-byte grid as a plaintext one: its payload stays
 * 64-byte aligned relative to the buffer.
 *
 * The header is authenticated, so changing the key id, nonce or version
 * fails the tag; the block key is authenticated without being stored, so a
 * blob copied to another key's path (another prefix, another tenant) fails
 * it too.
 */
export const SEAL_MAGIC = 0x5354564b; // "KVTS" read as u32 LE
export const SEAL_VERSION = 1;
export const SEAL_ALGORITHM_AES_256_GCM = 1;
export const SEAL_HEADER_BYTES = 64;
export const SEAL_NONCE_BYTES = 12;
export const SEAL_TAG_BYTES = 16;
export const SEAL_OVERHEAD_BYTES = SEAL_HEADER_BYTES + SEAL_TAG_BYTES;
export const SEAL_NONCE_OFFSET = 12;
/** Header byte naming what the envelope holds (authenticated with the header, readable without the key). */
export const SEAL_CONTENT_OFFSET = 24;
const CONTENT_TAIL = 1;
/** "KVTT" (tail-codec.ts TAIL_MAGIC), the first bytes of a unit tail file. */
const TAIL_FILE_MAGIC = [0x4b, 0x56, 0x54, 0x54];
const MAX_KEY_ID = 0xffffffff;

export interface SealHeader {
  version: number;
  algorithm: 'aes-256-gcm';
  keyId: number;
  nonce: Uint8Array;
}

/** True when `bytes` start with the envelope's magic (cheap; says nothing of validity). */
export function looksSealed(bytes: Uint8Array): boolean {
  return bytes.byteLength >= 4 && bytes[0] === 0x4b && bytes[1] === 0x56 && bytes[2] === 0x54 && bytes[3] === 0x53;
}

/** Writes the header fields around the nonce (bytes [0, 12) and the zero padding [24, 64)); the caller writes the nonce at SEAL_NONCE_OFFSET. */
export function writeSealHeader(out: Uint8Array, keyId: number): void {
  out.fill(0, SEAL_NONCE_OFFSET + SEAL_NONCE_BYTES, SEAL_HEADER_BYTES);
  const view = new DataView(out.buffer, out.byteOffset, SEAL_HEADER_BYTES);
  view.setUint32(0, SEAL_MAGIC, true);
  view.setUint8(4, SEAL_VERSION);
  view.setUint8(5, SEAL_ALGORITHM_AES_256_GCM);
  view.setUint16(6, SEAL_HEADER_BYTES, true);
  view.setUint32(8, keyId, true);
}

/** Notes in a header being written what `plain` (the file it seals) is: a unit tail or a block. */
export function markSealedContent(header: Uint8Array, plain: Uint8Array): void {
  const tail = plain.byteLength >= 4 && TAIL_FILE_MAGIC.every((byte, i) => plain[i] === byte);
  header[SEAL_CONTENT_OFFSET] = tail ? CONTENT_TAIL : 0;
}

/** What a sealed blob holds, from its header alone (envelopes written before the content byte say block). */
export function sealedContent(bytes: Uint8Array): 'block' | 'tail' {
  return bytes.byteLength > SEAL_CONTENT_OFFSET && bytes[SEAL_CONTENT_OFFSET] === CONTENT_TAIL ? 'tail' : 'block';
}

/** Parses and checks the header (not the tag). Throws KVT_ERR_SEAL_MALFORMED; the nonce is a view. */
export function readSealHeader(bytes: Uint8Array): SealHeader {
  if (!looksSealed(bytes)) throw new SealError('KVT_ERR_SEAL_MALFORMED', 'not a sealed block (magic "KVTS" missing)');
  if (bytes.byteLength < SEAL_OVERHEAD_BYTES) {
    throw new SealError('KVT_ERR_SEAL_MALFORMED', `sealed block is ${bytes.byteLength} bytes, shorter than its ${SEAL_OVERHEAD_BYTES} bytes of header and tag`);
  }
  const view = new DataView(bytes.buffer, bytes.byteOffset, SEAL_HEADER_BYTES);
  const version = view.getUint8(4);
  if (version !== SEAL_VERSION) throw new SealError('KVT_ERR_SEAL_MALFORMED', `envelope version ${version}; this build opens version ${SEAL_VERSION} only`);
  const algorithm = view.getUint8(5);
  if (algorithm !== SEAL_ALGORITHM_AES_256_GCM) throw new SealError('KVT_ERR_SEAL_MALFORMED', `envelope algorithm ${algorithm}; this build knows 1 (AES-256-GCM) only`);
  if (view.getUint16(6, true) !== SEAL_HEADER_BYTES) throw new SealError('KVT_ERR_SEAL_MALFORMED', `envelope header size ${view.getUint16(6, true)}, expected ${SEAL_HEADER_BYTES}`);
  return { version, algorithm: 'aes-256-gcm', keyId: view.getUint32(8, true), nonce: bytes.subarray(SEAL_NONCE_OFFSET, SEAL_NONCE_OFFSET + SEAL_NONCE_BYTES) };
}

/** A key id as the envelope stores it: a u32 ≥ 1. */
export function isKeyId(value: unknown): value is number {
  return Number.isInteger(value) && (value as number) >= 1 && (value as number) <= MAX_KEY_ID;
}
