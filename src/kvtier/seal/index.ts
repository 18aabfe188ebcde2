/** Encryption at rest for kvtier blocks: AES-256-GCM envelopes, HKDF per-tenant keys, key ids and rotation. */
export { BlockSealer, type BlockSealerOptions } from './block-sealer.ts';
export { describeSealed, openStored, openStoredAsync, openStoredForDecode, type OpenedBlock } from './open-stored.ts';
export { defaultOpenThreads, OpenWorkers } from './open-workers.ts';
export { NonceSource } from './nonce-source.ts';
export {
  looksSealed,
  sealedContent,
  readSealHeader,
  SEAL_ALGORITHM_AES_256_GCM,
  SEAL_HEADER_BYTES,
  SEAL_MAGIC,
  SEAL_NONCE_BYTES,
  SEAL_OVERHEAD_BYTES,
  SEAL_TAG_BYTES,
  SEAL_VERSION,
  type SealHeader,
} from './seal-envelope.ts';
export { SealError, type SealErrorCode } from './seal-errors.ts';
export { keyringFromSecret, MIN_SECRET_CHARS, parseKeyringJson, SealKeyring, validateKeyringSpec, type SealKeyringSpec } from './seal-keyring.ts';
export { SealedRead, type ReadOpenFn } from './sealed-read.ts';
