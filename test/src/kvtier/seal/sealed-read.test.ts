/**
 * Sealed blocks read and opened in one pass on the fs store
 * (seal/sealed-read.ts through GetOptions.fill → native aesGcmReadOpen):
 * the store calls the fill and the block comes back opened and
 * authenticated, same bytes as seal + node:crypto open; a tampered blob is
 * KVT_ERR_SEAL_AUTH_FAILED with the ciphertext zeroed; a blob under an older
 * key id or a plaintext block is left as stored (result undefined) for the
 * usual open; through KvTier all of these are the same hits and misses as
 * before (rotation keeps old blocks readable, tampering ends the load).
 */
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { KvTier, payloadBytesFor, type KvLayout } from '../../../../src/kvtier/index.ts';
import { BlockSealer, keyringFromSecret, parseKeyringJson, SEAL_HEADER_BYTES, SEAL_TAG_BYTES } from '../../../../src/kvtier/seal/index.ts';
import { captureLogger, payloadFor, tempDir, tokensOf } from '../fixtures.ts';

const SALT = 'sealed-read-salt';
const BIG: KvLayout = { layers: 8, kvHeads: 2, headDim: 64, dtype: 'f16', tokensPerBlock: 64 };
const BYTES = payloadBytesFor(BIG, 64);
const scope = { tenant: 'acme', trafficClass: 'chat' };
const KEY_A = 'sealed-read-secret-aaaa-0123456789abcdef';
const KEY_B = 'sealed-read-secret-bbbb-0123456789abcdef';

let dir: { path: string; remove: () => Promise<void> };
let store: FsBlobStore;

beforeEach(async () => {
  dir = await tempDir('kvtier-sealed-read-');
  store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
});

afterEach(async () => {
  await store.close();
  await dir.remove();
});

const hexKey = () => randomBytes(16).toString('hex');

describe('SealedRead on the fs store', () => {
  const sealer = new BlockSealer(keyringFromSecret(KEY_A));

  it('the store calls the fill and the block comes back opened, equal to the node:crypto open, for sizes across the 64 KiB pieces', async () => {
    for (const size of [1, 4000, 64 * 1024 - 80, 64 * 1024 - 79, 64 * 1024, 300_001, 786_432 + 128]) {
      const plain = Uint8Array.from(randomBytes(size));
      const blockKey = Uint8Array.from(randomBytes(16));
      const key = hexKey();
      const sealed = sealer.seal(plain, blockKey, SALT);
      await store.put(key, sealed);
      const read = sealer.sealedRead(blockKey, SALT)!;
      const bytes = (await store.get(key, { fill: read.fill }))!;
      const opened = read.result(bytes);
      expect(opened?.authenticatedBy, `${size}`).toBe('aes-256-gcm');
      expect(Buffer.from(opened!.plain).equals(Buffer.from(plain)), `${size}`).toBe(true);
      expect(Buffer.from(opened!.plain).equals(Buffer.from(sealer.open(sealed, blockKey, SALT)))).toBe(true);
    }
  });

  it('a tampered blob is KVT_ERR_SEAL_AUTH_FAILED and its ciphertext zeroed; another block key too', async () => {
    const plain = Uint8Array.from(randomBytes(200_000));
    const blockKey = Uint8Array.from(randomBytes(16));
    const sealed = sealer.seal(plain, blockKey, SALT);
    sealed[150_000] ^= 0x02;
    const key = hexKey();
    await store.put(key, sealed);
    const read = sealer.sealedRead(blockKey, SALT)!;
    const bytes = (await store.get(key, { fill: read.fill }))!;
    expect(() => read.result(bytes)).toThrow(expect.objectContaining({ code: 'KVT_ERR_SEAL_AUTH_FAILED' }));
    expect(bytes.subarray(SEAL_HEADER_BYTES, bytes.byteLength - SEAL_TAG_BYTES).every((b) => b === 0)).toBe(true);
    const moved = sealer.sealedRead(Uint8Array.from(randomBytes(16)), SALT)!;
    await store.delete([key]);
    await store.put(key, sealer.seal(plain, blockKey, SALT));
    const movedBytes = (await store.get(key, { fill: moved.fill }))!;
    expect(() => moved.result(movedBytes)).toThrow(expect.objectContaining({ code: 'KVT_ERR_SEAL_AUTH_FAILED' }));
  });

  it('an older key id or a plaintext block is left as stored (result undefined)', async () => {
    const blockKey = Uint8Array.from(randomBytes(16));
    const plain = Uint8Array.from(randomBytes(100_000));
    const old = new BlockSealer(parseKeyringJson(JSON.stringify({ current: 1, keys: { 1: KEY_A } }), 'test'));
    const rotated = new BlockSealer(parseKeyringJson(JSON.stringify({ current: 2, keys: { 1: KEY_A, 2: KEY_B } }), 'test'));
    const sealedOld = old.seal(plain, blockKey, SALT);
    for (const stored of [sealedOld, plain]) {
      const key = hexKey();
      await store.put(key, stored);
      const read = rotated.sealedRead(blockKey, SALT)!;
      const bytes = (await store.get(key, { fill: read.fill }))!;
      expect(read.result(bytes)).toBeUndefined();
      expect(Buffer.from(bytes).equals(Buffer.from(stored))).toBe(true);
    }
    expect(Buffer.from(rotated.open(sealedOld, blockKey, SALT)).equals(Buffer.from(plain))).toBe(true);
  });

  it('without the native read (readOpen: false) there is no SealedRead', () => {
    expect(new BlockSealer(keyringFromSecret(KEY_A), { readOpen: false }).sealedRead(new Uint8Array(16), SALT)).toBeUndefined();
  });
});

describe('KvTier loads through the sealed read', () => {
  it('same payloads; after rotation old blocks still load; a tampered block ends the load with KVT_ERR_SEAL_AUTH_FAILED', async () => {
    const writer = await KvTier.open({ dataDir: join(dir.path, 'writer'), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0, seal: new BlockSealer(parseKeyringJson(JSON.stringify({ current: 1, keys: { 1: KEY_A } }), 'test')) });
    const reader = await KvTier.open({ dataDir: join(dir.path, 'reader'), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0, seal: new BlockSealer(parseKeyringJson(JSON.stringify({ current: 2, keys: { 1: KEY_A, 2: KEY_B } }), 'test')) });
    try {
      const tokens = tokensOf(64 * 6, 3);
      writer.store({ namespace: writer.namespace({ modelFingerprint: 'sr', tenantSalt: SALT }), tokens, layout: BIG, ...scope, payloads: Array.from({ length: 3 }, (_, b) => payloadFor(3, b, BYTES)) });
      await writer.flush();
      reader.store({ namespace: reader.namespace({ modelFingerprint: 'sr', tenantSalt: SALT }), tokens, layout: BIG, ...scope, fromBlock: 3, payloads: Array.from({ length: 3 }, (_, b) => payloadFor(3, b + 3, BYTES)) });
      await reader.flush();
      const fresh = await KvTier.open({ dataDir: join(dir.path, 'fresh'), store, hotCacheBytes: 0, logger: captureLogger(), touchIntervalMs: 0, seal: new BlockSealer(parseKeyringJson(JSON.stringify({ current: 2, keys: { 1: KEY_A, 2: KEY_B } }), 'test')) });
      try {
        const namespace = fresh.namespace({ modelFingerprint: 'sr', tenantSalt: SALT });
        const hit = await fresh.lookup(namespace, tokens, scope);
        expect(hit.hitBlocks).toBe(6);
        const loaded = await fresh.load(hit);
        expect(loaded.blocks).toHaveLength(6);
        loaded.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(3, i, BYTES))), `${i}`).toBe(true));
        loaded.release();
        const blob = (await store.get(hit.keys[4]))!.slice();
        blob[blob.byteLength - 1000] ^= 0x01;
        await store.delete([hit.keys[4]]);
        await store.put(hit.keys[4], blob);
        const again = await fresh.load(hit);
        expect(again.stoppedAt).toEqual({ block: 4, code: 'KVT_ERR_SEAL_AUTH_FAILED' });
        expect(fresh.stats().errors.KVT_ERR_SEAL_AUTH_FAILED).toBe(1);
        again.release();
      } finally {
        await fresh.close();
      }
    } finally {
      await writer.close();
      await reader.close();
    }
  });
});
