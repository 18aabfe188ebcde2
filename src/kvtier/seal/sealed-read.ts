import { SEAL_HEADER_BYTES, SEAL_NONCE_OFFSET, SEAL_TAG_BYTES } from './seal-envelope.ts';
import { SealError } from './seal-errors.ts';
import type { OpenedBlock } from './open-stored.ts';

/** native/src/aes-gcm-read-napi.cc: 1 opened, 0 tag failed (ciphertext zeroed), 2 prefix differs (bytes as stored). */
export type ReadOpenFn = (fd: number, data: Uint8Array, key: Uint8Array, expectPrefix: Uint8Array, nonceOffset: number, headerBytes: number, aadSuffix: Uint8Array) => Promise<0 | 1 | 2>;

/**
 * One sealed block read and opened in one pass on the fs store: `fill` (a
 * storage GetOptions.fill) hands the open file to the native aesGcmReadOpen,
 * which reads it in 64 KiB pieces into the load buffer and decrypts each while
 * it is still in cache, on libuv's pool — one trip through the block and one
 * pool hop, where the store's read followed by a separate open took two of each.
 *
 * The key is chosen before the header is read, so this opens only blobs whose
 * header starts as the keyring's current key id writes it. Anything else (an
 * older key id, a plaintext block, a malformed header, a store that does not
 * call `fill`) is left as stored and `result` says so (undefined): the caller
 * opens it the usual way (openStoredForDecode), which gives the precise error.
 */
export class SealedRead {
  private outcome: 0 | 1 | 2 | undefined;

  constructor(
    private readonly readOpen: ReadOpenFn,
    private readonly key: Uint8Array,
    /** The envelope header's first 12 bytes under the current key id: magic, version, algorithm, header size, key id. */
    private readonly prefix: Uint8Array,
    private readonly blockKey: Uint8Array,
  ) {}

  readonly fill = async (fd: number, bytes: Uint8Array): Promise<void> => {
    this.outcome = await this.readOpen(fd, bytes, this.key, this.prefix, SEAL_NONCE_OFFSET, SEAL_HEADER_BYTES, this.blockKey);
  };

  /** The opened block inside `bytes` (what the get returned), or undefined when the fill did not open it. Throws KVT_ERR_SEAL_AUTH_FAILED when its tag failed. */
  result(bytes: Uint8Array): OpenedBlock | undefined {
    if (this.outcome === 0) throw new SealError('KVT_ERR_SEAL_AUTH_FAILED', 'sealed block failed authentication: tampered, stored under another key, or sealed for another tenant');
    if (this.outcome !== 1) return undefined;
    return { plain: bytes.subarray(SEAL_HEADER_BYTES, bytes.byteLength - SEAL_TAG_BYTES), authenticatedBy: 'aes-256-gcm' };
  }
}
