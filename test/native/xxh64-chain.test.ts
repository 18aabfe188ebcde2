/**
 * xxh64Chain (native/src/xxh64-napi.cc) against its definition, block by block through the addon's one-shot
 * xxh64: key_i = xxh64(key_{i-1} ‖ tokens_i, seedHi) ‖ xxh64(…, seedLo), big-endian (kvtier's prefix chain; the
 * wasm twin is checked against it in test/src/kvtier/prefix-hasher.test.ts). Bad arguments are KVT_ERR_NATIVE_ARG.
 */
import { describe, expect, it } from 'vitest';

import { loadAddon } from '../../native/index.ts';

const addon = loadAddon();

describe('xxh64Chain', () => {
  it('is the chain of two seeded xxh64 per block, for any block size and count', () => {
    const seeds = [0x6b76746965722d31n, 0x6b76746965722d32n] as const;
    for (const [blockTokens, blockCount] of [[1, 1], [3, 5], [64, 12], [512, 3]]) {
      const tokens = Uint32Array.from({ length: blockTokens * blockCount + 2 }, (_, i) => (i * 2_654_435_761) >>> 0);
      const root = Uint8Array.from({ length: 16 }, (_, i) => i * 17);
      const out = new Uint8Array(16 * blockCount);
      addon.xxh64Chain(root, tokens, blockTokens, blockCount, seeds[0], seeds[1], out);
      let parent: Uint8Array = root;
      for (let b = 0; b < blockCount; b++) {
        const input = new Uint8Array(16 + blockTokens * 4);
        input.set(parent, 0);
        input.set(new Uint8Array(tokens.buffer, b * blockTokens * 4, blockTokens * 4), 16);
        const key = new Uint8Array(16);
        const view = new DataView(key.buffer);
        view.setBigUint64(0, addon.xxh64(input, seeds[0]), false);
        view.setBigUint64(8, addon.xxh64(input, seeds[1]), false);
        expect(Buffer.from(out.subarray(b * 16, b * 16 + 16)).toString('hex')).toBe(Buffer.from(key).toString('hex'));
        parent = key;
      }
    }
  });

  it('refuses a short root, too few tokens (however many blocks are asked for), a short output or a token array of another type', () => {
    const tokens = new Uint32Array(8);
    const call = (root: Uint8Array, t: Uint32Array | Uint8Array, count: number, out: Uint8Array) => () => addon.xxh64Chain(root, t as Uint32Array, 4, count, 1n, 2n, out);
    for (const bad of [
      call(new Uint8Array(15), tokens, 2, new Uint8Array(32)),
      call(new Uint8Array(16), tokens, 3, new Uint8Array(48)),
      call(new Uint8Array(16), tokens, 2, new Uint8Array(31)),
      call(new Uint8Array(16), new Uint8Array(32), 2, new Uint8Array(32)),
      // 4 × 2^62 blocks wraps a 64-bit product to 0: the bound must not overflow.
      call(new Uint8Array(16), tokens, 2 ** 62, new Uint8Array(32)),
    ]) {
      expect(bad).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
    }
  });
});
