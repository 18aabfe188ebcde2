/**
 * The checksum rule for sealed blocks (block-codec.ts): a block whose AES-GCM
 * tag verified skips the payload XXH64 (the tag covers those bytes) and keeps
 * the meta checksum; a plaintext block keeps both. So: bytes flipped on
 * storage in a sealed block's payload region are still a counted miss (the
 * tag, KVT_ERR_SEAL_AUTH_FAILED) on the native and the node:crypto open; a
 * plaintext block's flipped payload is KVT_ERR_BLOCK_PAYLOAD_CHECKSUM; a
 * header or tokens broken under a valid tag (a writer that sealed a broken
 * block) is still KVT_ERR_BLOCK_HEADER_CHECKSUM; a payload broken under a
 * valid tag is served — what the rule gives up, stated here so a change to it
 * shows.
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

describe('sealed load: the tag is the payload check, the header keeps its checksum', () => {
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

  /** Flips one byte of block i's blob where it lies on storage (fs layout: the key's file). */
  const flipOnStorage = async (hit: Awaited<ReturnType<typeof storedPrompt>>, i: number, fromEnd: number) => {
    const key = hit.keys[i];
    const blob = (await store.get(key))!.slice();
    blob[blob.byteLength - fromEnd] ^= 0x01;
    await store.delete([key]);
    await store.put(key, blob);
  };

  for (const nativeOpen of [true, false]) {
    it(`a payload byte flipped on storage is KVT_ERR_SEAL_AUTH_FAILED, counted, the load cut there (${nativeOpen ? 'native' : 'node:crypto'} open)`, async () => {
      const opener = new BlockSealer(sealer.keyring, { nativeOpen, openThreads: 0 });
      const reader = await KvTier.open({ dataDir: join(dir.path, `reader-${nativeOpen}`), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0, seal: opener });
      try {
        expect(opener.openPath).toBe(nativeOpen ? 'native' : 'inline');
        const hit = await storedPrompt(2);
        await flipOnStorage(hit, 2, 100 + 16); // inside the payload's ciphertext, before the tag
        const readerHit = await reader.lookup(reader.namespace({ modelFingerprint: 'seal-sum', tenantSalt: SALT }), hit.tokens, scope);
        const loaded = await reader.load(readerHit);
        expect(loaded.blocks).toHaveLength(2);
        expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_SEAL_AUTH_FAILED' });
        expect(reader.stats().errors.KVT_ERR_SEAL_AUTH_FAILED).toBe(1);
      } finally {
        await reader.close();
        await opener.close();
      }
    });
  }

  it('a payload changed under a valid tag (the writer sealed it so) is served: the tag, not the XXH64, vouches for it', async () => {
    const hit = await storedPrompt(5);
    await resealed(hit, 2, (file) => (file[file.byteLength - 100] ^= 0x01));
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(4);
    const expected = payloadFor(5, 2, BYTES);
    expected[BYTES - 100] ^= 0x01;
    expect(Buffer.from(loaded.blocks[2].payload).equals(Buffer.from(expected))).toBe(true);
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

describe('plaintext load: the payload checksum is still checked', () => {
  it('a payload byte flipped on storage is KVT_ERR_BLOCK_PAYLOAD_CHECKSUM, counted, the load cut there', async () => {
    const dir = await tempDir('kvtier-plain-sum-');
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0 });
    try {
      const namespace = tier.namespace({ modelFingerprint: 'plain-sum', tenantSalt: SALT });
      const tokens = tokensOf(64 * 4, 6);
      tier.store({ namespace, tokens, layout: BIG, ...scope, payloads: Array.from({ length: 4 }, (_, b) => payloadFor(6, b, BYTES)) });
      await tier.flush();
      const hit = await tier.lookup(namespace, tokens, scope);
      const blob = (await store.get(hit.keys[1]))!.slice();
      blob[blob.byteLength - 100] ^= 0x01;
      await store.delete([hit.keys[1]]);
      await store.put(hit.keys[1], blob);
      const loaded = await tier.load(hit);
      expect(loaded.stoppedAt).toEqual({ block: 1, code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' });
      expect(tier.stats().errors.KVT_ERR_BLOCK_PAYLOAD_CHECKSUM).toBe(1);
    } finally {
      await tier.close();
      await store.close();
      await dir.remove();
    }
  });
});

describe('BlockCodec.decode with authenticatedBy', () => {
  it('skips the payload checksum and still checks the meta checksum', async () => {
    const codec = await BlockCodec.create();
    const file = codec.encode({ key: new Uint8Array(16).fill(1), parentKey: new Uint8Array(16), modelFingerprint: 'fp', tokens: tokensOf(64, 7), layout: BIG, payload: payloadFor(7, 0, BYTES) });
    const payloadFlipped = file.slice();
    payloadFlipped[payloadFlipped.byteLength - 1] ^= 0x01;
    expect(() => codec.decode(payloadFlipped)).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' }));
    expect(codec.decode(payloadFlipped, { authenticatedBy: 'aes-256-gcm' }).payload[BYTES - 1]).toBe(payloadFlipped[payloadFlipped.byteLength - 1]);
    const tokensFlipped = file.slice();
    tokensFlipped[new DataView(file.buffer).getUint32(12, true)] ^= 0x01;
    expect(() => codec.decode(tokensFlipped, { authenticatedBy: 'aes-256-gcm' })).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_HEADER_CHECKSUM' }));
  });
});
