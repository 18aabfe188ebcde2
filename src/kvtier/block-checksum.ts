import type { XXHashAPI } from 'xxhash-wasm';

import { loadAddon } from '../../native/index.ts';

/** The one hash the block format uses: XXH64 with a seed (block-codec.ts). */
export interface BlockChecksum {
  h64Raw(bytes: Uint8Array, seed: bigint): bigint;
  /** `native` hashes the caller's buffer in place; `wasm` copies it into wasm memory first. */
  readonly kind: 'native' | 'wasm';
  /** Why the native hash is not used (the addon's error), when it is not. */
  readonly why?: string;
}

/**
 * Block checksums through the native addon when it is built (in place: a
 * 1 MiB payload is not copied into wasm memory first, which was half of the
 * verification cost on the hit path), else through xxhash-wasm. Both compute
 * the same XXH64, so files written by either verify under the other (tested
 * in test/src/kvtier/block-checksum.test.ts).
 */
export function blockChecksum(wasm: XXHashAPI): BlockChecksum {
  let why = 'KVTIER_BLOCK_CHECKSUM=wasm';
  if (process.env.KVTIER_BLOCK_CHECKSUM !== 'wasm') {
    try {
      const addon = loadAddon();
      if (typeof addon.xxh64 === 'function') return { kind: 'native', h64Raw: (bytes, seed) => addon.xxh64(bytes, seed) };
      why = 'the native addon has no xxh64 (an older build): rebuild with `npm run install`';
    } catch (error) {
      // Not built, or a stale build: the wasm hash gives the same checksums, only slower.
      why = (error as Error).message;
    }
  }
  return { kind: 'wasm', why, h64Raw: (bytes, seed) => wasm.h64Raw(bytes, seed) };
}
