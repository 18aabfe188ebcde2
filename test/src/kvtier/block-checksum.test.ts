/**
 * The native in-place XXH64 (native/src/xxh64-napi.cc) against its reference,
 * xxhash-wasm's h64Raw: the same value for every length around the 32-byte
 * stripe and 8/4/1-byte tail boundaries, unaligned views and the seeds the
 * block format and prefix hasher use; and blocks encoded under one verify
 * under the other.
 */
import { describe, expect, it } from 'vitest';
import xxhash from 'xxhash-wasm';

import { loadAddon } from '../../../native/load-addon.ts';
import { blockChecksum } from '../../../src/kvtier/block-checksum.ts';
import { BlockCodec } from '../../../src/kvtier/block-codec.ts';
import { LAYOUT, payloadFor, tokensOf } from './fixtures.ts';

describe('block checksum: native xxh64 == xxhash-wasm', () => {
  it('matches on every length 0..300 and at 1 MiB ± 7, at byte offsets 0..3, for several seeds', async () => {
    const wasm = await xxhash();
    const addon = loadAddon();
    const data = new Uint8Array((1 << 20) + 16);
    let state = 0x2545f491;
    for (let i = 0; i < data.length; i++) data[i] = (state = (Math.imul(state, 1103515245) + 12345) >>> 0) >>> 24;
    const seeds = [0n, 1n, 0x9e3779b97f4a7c15n, 0xffffffffffffffffn];
    const lengths = [...Array.from({ length: 301 }, (_, n) => n), (1 << 20) - 7, 1 << 20, (1 << 20) + 7];
    let compared = 0;
    for (const seed of seeds) {
      for (const length of lengths) {
        for (const offset of length > 4096 ? [0, 3] : [0, 1, 2, 3]) {
          const view = data.subarray(offset, offset + length);
          expect(addon.xxh64(view, seed), `length ${length} offset ${offset} seed ${seed}`).toBe(wasm.h64Raw(view, seed));
          compared++;
        }
      }
    }
    expect(compared).toBeGreaterThan(4800);
  });

  it('is what BlockCodec uses when the addon is built, and blocks verify across the two', async () => {
    expect(blockChecksum(await xxhash()).kind).toBe('native');
    const native = await BlockCodec.create();
    expect(native.checksumKind).toBe('native');
    process.env.KVTIER_BLOCK_CHECKSUM = 'wasm';
    let wasm: BlockCodec;
    try {
      wasm = await BlockCodec.create();
    } finally {
      delete process.env.KVTIER_BLOCK_CHECKSUM;
    }
    expect(wasm.checksumKind).toBe('wasm');
    const block = { key: new Uint8Array(16).fill(3), parentKey: new Uint8Array(16).fill(4), modelFingerprint: 'fp', tokens: tokensOf(64, 1), layout: LAYOUT, payload: payloadFor(1, 0) };
    const a = native.encode(block);
    const b = wasm.encode(block);
    expect(Buffer.from(a).equals(Buffer.from(b))).toBe(true);
    expect(Buffer.from(wasm.decode(a).payload).equals(Buffer.from(block.payload))).toBe(true);
    expect(Buffer.from(native.decode(b).payload).equals(Buffer.from(block.payload))).toBe(true);
    const flipped = a.slice();
    flipped[flipped.length - 1] ^= 1;
    expect(() => native.decode(flipped)).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' }));
  });
});
