/**
 * What a store holds → the encoded block, for KvTier's load path and
 * `kvtier inspect`: envelopes open only with a sealer, plaintext passes only
 * without one, so a node never serves what the other mode wrote.
 */
import type { BlockSealer } from './block-sealer.ts';
import { looksSealed, readSealHeader, type SealHeader } from './seal-envelope.ts';
import { SealError } from './seal-errors.ts';

export interface OpenedBlock {
  plain: Uint8Array;
  /**
   * Set when `plain` came out of an envelope whose AES-GCM tag verified: every
   * byte of it is what the writer sealed (BlockCodec.decode then skips the
   * payload XXH64; see the checksum rule in block-codec.ts).
   */
  authenticatedBy?: 'aes-256-gcm';
}

/**
 * What a store holds → the encoded block, for KvTier's load path. With a
 * sealer only envelopes open (a plaintext block is refused: KVT_ERR_SEAL_NOT_SEALED),
 * decrypted in place (`stored` is consumed); without one only plaintext
 * passes (an envelope is KVT_ERR_SEAL_NO_KEYRING).
 */
export function openStored(sealer: BlockSealer | undefined, stored: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Uint8Array {
  if (sealer === undefined) {
    if (looksSealed(stored)) throw new SealError('KVT_ERR_SEAL_NO_KEYRING', 'this block is sealed but encryption is off on this node; set KVTIER_ENCRYPTION_SECRET or KVTIER_ENCRYPTION_KEYRING as the writers do');
    return stored;
  }
  if (!looksSealed(stored)) throw new SealError('KVT_ERR_SEAL_NOT_SEALED', 'a plaintext block was read while encryption is on; it is not served (it expires like any block)');
  return sealer.openInPlace(stored, blockKey, tenantSalt);
}

/** `openStored` with large blocks decrypted on the sealer's threads when it has some (KvTier's load path; `stored` is consumed). */
export async function openStoredAsync(sealer: BlockSealer | undefined, stored: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Promise<Uint8Array> {
  if (sealer === undefined || !looksSealed(stored)) return openStored(sealer, stored, blockKey, tenantSalt);
  return sealer.openAsync(stored, blockKey, tenantSalt);
}

/**
 * KvTier's load path: `openStoredAsync`, saying whether the result was
 * authenticated (every sealed block that opens is: its tag verified), so the
 * decoder need not hash the payload again. Large blocks open natively
 * without hashing (`stored` is consumed).
 */
export async function openStoredForDecode(sealer: BlockSealer | undefined, stored: Uint8Array, blockKey: Uint8Array, tenantSalt: string): Promise<OpenedBlock> {
  if (sealer === undefined || !looksSealed(stored)) return { plain: openStored(sealer, stored, blockKey, tenantSalt) };
  return { plain: await sealer.openAsync(stored, blockKey, tenantSalt), authenticatedBy: 'aes-256-gcm' };
}

/** Encryption of a stored blob as `kvtier inspect` shows it: null for a plaintext block. */
export function describeSealed(stored: Uint8Array): { algorithm: SealHeader['algorithm']; keyId: number; envelopeVersion: number } | { problem: string } | null {
  if (!looksSealed(stored)) return null;
  try {
    const header = readSealHeader(stored);
    return { algorithm: header.algorithm, keyId: header.keyId, envelopeVersion: header.version };
  } catch (error) {
    return { problem: (error as Error).message };
  }
}
