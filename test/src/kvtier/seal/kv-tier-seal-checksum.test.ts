/**
 * Sealed blocks of 64 KiB and more open natively, and the payload checksum is
 * computed while decrypting (aesGcmOpenHashInPlace) instead of by a second
 * pass: it must still be checked. A block re-sealed with a valid tag around a
 * corrupt plaintext (payload or tokens flipped) is a counted miss with the
 * block format's own code; a given checksum only counts for the header's
 * payload range.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { BlockCodec, KvTier, payloadBytesFor, type KvLayout } from '../../../../src/kvtier/index.ts';
import { BlockSealer, keyringFromSecret } from '../../../../src/kvtier/seal/index.ts';
import { captureLogger, payloadFor, tempDir, tokensOf } from '../fixtures.ts';

/** 256 KiB per block: above the native open's 64 KiB threshold. */
const BIG: KvLayout = { layers: 8, kvHeads: 2, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };
const BYTES = payloadBytesFor(BIG, 64);
const SALT = 'acme-salt';
const scope = { tenant: 'acme', trafficClass: 'chat' };

describe('sealed load: payload checksum hashed during the native open', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: FsBlobStore;
  let tier: KvTier;
  let sealer: BlockSealer;

  beforeEach(async () => {
    dir = await tempDir('kvtier-seal-sum-');
    store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    sealer = new BlockSealer(keyringFromSecret('seal-checksum-secret-0123456789abcdef'));
    tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0, seal: sealer });
  });

  afterEach(async () => {
    await tier.close();
    await sealer.close();
    await store.close();
    await dir.remove();
  });

  const storedPrompt = async (seed: number) => {
    const namespace = tier.namespace({ modelFingerprint: 'seal-sum', tenantSalt: SALT });
    const tokens = tokensOf(64 * 4, seed);
    tier.store({ namespace, tokens, layout: BIG, ...scope, payloads: Array.from({ length: 4 }, (_, b) => payloadFor(seed, b, BYTES)) });
    await tier.flush();
    const hit = await tier.lookup(namespace, tokens, scope);
    expect(hit.hitBlocks).toBe(4);
    return hit;
  };

  /** Opens block i's blob, lets `mutate` change the plaintext block file, and seals it again (a valid tag). */
  const resealed = async (hit: Awaited<ReturnType<typeof storedPrompt>>, i: number, mutate: (file: Uint8Array) => void) => {
    const key = hit.keys[i];
    const plain = sealer.open((await store.get(key))!, hit.chain.keyBytes(i), SALT);
    mutate(plain);
    await store.delete([key]);
    await store.put(key, sealer.seal(plain, hit.chain.keyBytes(i), SALT));
  };

  it('loads big sealed blocks through the native open, payloads exact', async () => {
    expect(sealer.openPath).toBe('native');
    const hit = await storedPrompt(1);
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(4);
    loaded.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(1, i, BYTES)))).toBe(true));
  });

  it('a payload corrupted under a valid tag is KVT_ERR_BLOCK_PAYLOAD_CHECKSUM, counted, the load cut there', async () => {
    const hit = await storedPrompt(2);
    await resealed(hit, 2, (file) => (file[file.byteLength - 100] ^= 0x01));
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(2);
    expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' });
    expect(tier.stats().errors.KVT_ERR_BLOCK_PAYLOAD_CHECKSUM).toBe(1);
  });

  it('tokens corrupted under a valid tag are KVT_ERR_BLOCK_HEADER_CHECKSUM', async () => {
    const hit = await storedPrompt(3);
    await resealed(hit, 1, (file) => {
      const tokensOffset = new DataView(file.buffer, file.byteOffset).getUint32(12, true);
      file[tokensOffset] ^= 0x01;
    });
    const loaded = await tier.load(hit);
    expect(loaded.stoppedAt).toEqual({ block: 1, code: 'KVT_ERR_BLOCK_HEADER_CHECKSUM' });
  });
});

describe('BlockCodec.decode with a given payload checksum', () => {
  it('uses it only for the header payload range: a wrong value there fails, one for another range is ignored', async () => {
    const codec = await BlockCodec.create();
    const file = codec.encode({ key: new Uint8Array(16).fill(1), parentKey: new Uint8Array(16), modelFingerprint: 'fp', tokens: tokensOf(64, 4), layout: BIG, payload: payloadFor(4, 0, BYTES) });
    const payloadOffset = new DataView(file.buffer).getUint32(16, true);
    const right = new DataView(file.buffer).getBigUint64(88, true);
    expect(codec.decode(file, { payloadChecksum: { from: payloadOffset, value: right } }).payload.byteLength).toBe(BYTES);
    expect(() => codec.decode(file, { payloadChecksum: { from: payloadOffset, value: right ^ 1n } })).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' }));
    expect(codec.decode(file, { payloadChecksum: { from: payloadOffset - 64, value: right ^ 1n } }).payload.byteLength).toBe(BYTES);
  });
});
