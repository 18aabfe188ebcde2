/**
 * Recycled read buffers on the hit path (LoadedBlocks.release): a released
 * load's buffers are read into again by later loads, the hot tier and every
 * unreleased load keep their blocks intact, views kept past release read as
 * empty (never another block's bytes), and a store that returns its own
 * buffers (ignoring `allocate`) never has them taken. Plain, codec (int8)
 * and sealed blocks, on a real FsBlobStore.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore, type BlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, type KvTierOptions, type LookupResult } from '../../../src/kvtier/index.ts';
import { BlockSealer, keyringFromSecret } from '../../../src/kvtier/seal/index.ts';
import { floatPayload } from './codecs/codec-fixtures.ts';
import { BLOCK_PAYLOAD_BYTES, captureLogger, LAYOUT, payloadFor, tempDir, tokensOf } from './fixtures.ts';

const scope = { tenant: 'acme', trafficClass: 'chat' };
const BLOCKS = 4;

/** Keeps every blob in memory and returns that very buffer from get (ignores `allocate`). */
class OwnBuffersStore implements BlobStore {
  readonly kind = 'memory';
  readonly location = 'memory';
  readonly blobs = new Map<string, Uint8Array>();
  async put(key: string, bytes: Uint8Array): Promise<void> {
    this.blobs.set(key, bytes.slice());
  }
  async get(key: string): Promise<Uint8Array | null> {
    return this.blobs.get(key) ?? null;
  }
  async has(keys: readonly string[]): Promise<boolean[]> {
    return keys.map((key) => this.blobs.has(key));
  }
  async delete(keys: readonly string[]): Promise<void> {
    for (const key of keys) this.blobs.delete(key);
  }
  async *list(prefix = ''): AsyncIterable<string> {
    for (const key of this.blobs.keys()) if (key.startsWith(prefix)) yield key;
  }
  async close(): Promise<void> {}
}

describe('KvTier.load: recycled buffers and LoadedBlocks.release', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: BlobStore;
  const tiers: KvTier[] = [];
  let nodes = 0;

  const openTier = async (extra: Partial<KvTierOptions> = {}) => {
    const tier = await KvTier.open({ dataDir: join(dir.path, `node-${nodes++}`), store, logger: captureLogger(), touchIntervalMs: 0, ...extra });
    tiers.push(tier);
    return tier;
  };
  /** Stores prompt `seed` through a writer tier; returns the lookup on `reader` (which has read nothing yet). */
  const stored = async (reader: KvTier, seed: number, payloads = Array.from({ length: BLOCKS }, (_, b) => payloadFor(seed, b))): Promise<LookupResult> => {
    const writer = await openTier({ hotCacheBytes: 0, seal: reader === sealedReader ? sealer() : undefined });
    await writer.policy.update((doc) => ({ ...doc, codec: readerCodec }));
    const tokens = tokensOf(64 * BLOCKS, seed);
    writer.store({ namespace: writer.namespace({ modelFingerprint: 'release-test', tenantSalt: 'acme' }), tokens, layout: LAYOUT, ...scope, payloads });
    await writer.flush();
    const hit = await reader.lookup(reader.namespace({ modelFingerprint: 'release-test', tenantSalt: 'acme' }), tokens, scope);
    expect(hit.hitBlocks).toBe(BLOCKS);
    return hit;
  };
  let sealedReader: KvTier | undefined;
  let readerCodec: 'none' | 'int8' = 'none';
  const sealer = () => new BlockSealer(keyringFromSecret('release-test-secret-0123456789abcdef'), { openThreads: 0 });

  beforeEach(async () => {
    dir = await tempDir('kvtier-release-');
    store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    sealedReader = undefined;
    readerCodec = 'none';
  });

  afterEach(async () => {
    for (const tier of tiers.splice(0)) await tier.close();
    await store.close();
    await dir.remove();
  });

  it('a later load reads into the released buffers; the released views read as empty, never as its data', async () => {
    const tier = await openTier({ hotCacheBytes: 0 });
    const a = await stored(tier, 1);
    const b = await stored(tier, 2);
    const first = await tier.load(a);
    expect(first.blocks).toHaveLength(BLOCKS);
    const kept = first.blocks.map((block) => block.payload);
    first.release();
    for (const view of kept) expect(view.byteLength).toBe(0);
    expect(first.blocks[0].tokens.length).toBe(0);
    const takenBefore = tier.stats().readBuffers!;
    const second = await tier.load(b);
    const after = tier.stats().readBuffers!;
    expect(after.reused - takenBefore.reused).toBe(BLOCKS);
    second.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(2, i)))).toBe(true));
    for (const view of kept) expect(view.byteLength).toBe(0);
    first.release(); // a second release changes nothing
    second.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(2, i)))).toBe(true));
  });

  it('the hot tier and an unreleased load keep their blocks until each lets go', async () => {
    // Room for one prompt: loading another evicts it.
    const tier = await openTier({ hotCacheBytes: (BLOCKS + 1) * (BLOCK_PAYLOAD_BYTES + 1024) });
    const a = await stored(tier, 3);
    const b = await stored(tier, 4);
    const first = await tier.load(a);
    first.release(); // the hot tier still holds prompt a
    const second = await tier.load(a);
    expect(tier.stats().hotCacheHits).toBe(BLOCKS);
    second.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(3, i)))).toBe(true));
    // Evict prompt a from the hot tier; `second` has not released, so its blocks stay.
    const third = await tier.load(b);
    expect(tier.stats().hotCache.blocks).toBeLessThanOrEqual(BLOCKS + 1);
    const fourth = await tier.load(b); // b is in RAM now: a's buffers are not reused under `second`
    second.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(3, i)))).toBe(true));
    second.release();
    third.release();
    fourth.release();
    expect(second.blocks[0].payload.byteLength).toBe(0);
    // Whatever comes from storage now is read into recycled buffers and is still right.
    const again = await tier.load(a);
    again.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(3, i)))).toBe(true));
  });

  it('codec blocks decode into recycled buffers; reloads after release give the same values', async () => {
    readerCodec = 'int8';
    const tier = await openTier({ hotCacheBytes: 0 });
    const payloads = Array.from({ length: BLOCKS }, (_, b) => floatPayload(LAYOUT, 10 + b));
    const hit = await stored(tier, 5, payloads);
    const first = await tier.load(hit);
    const copies = first.blocks.map((block) => Uint8Array.from(block.payload));
    first.release();
    const second = await tier.load(hit);
    expect(tier.stats().readBuffers!.reused).toBeGreaterThanOrEqual(2 * BLOCKS); // read + decode buffers
    second.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(copies[i]))).toBe(true));
  });

  it('sealed blocks open in place in recycled buffers; a reload after release is the same plaintext', async () => {
    const tier = await openTier({ hotCacheBytes: 0, seal: sealer() });
    sealedReader = tier;
    const hit = await stored(tier, 6);
    for (let round = 0; round < 3; round++) {
      const loaded = await tier.load(hit);
      loaded.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(6, i)))).toBe(true));
      loaded.release();
    }
    expect(tier.stats().readBuffers!.reused).toBe(2 * BLOCKS);
  });

  it('a store that returns its own buffers keeps them: release detaches nothing of the store', async () => {
    const memory = new OwnBuffersStore();
    store = memory;
    const tier = await openTier({ hotCacheBytes: 0 });
    const hit = await stored(tier, 7);
    const loaded = await tier.load(hit);
    loaded.release();
    for (const blob of memory.blobs.values()) expect(blob.byteLength).toBeGreaterThan(0);
    expect(loaded.blocks[0].payload.byteLength).toBe(BLOCK_PAYLOAD_BYTES);
    const again = await tier.load(hit);
    again.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(7, i)))).toBe(true));
  });

  it('a corrupt block is still a counted miss with recycled buffers, and its buffer is not handed out holding its bytes', async () => {
    const tier = await openTier({ hotCacheBytes: 0 });
    const hit = await stored(tier, 8);
    const victim = hit.keys[2];
    const bytes = (await store.get(victim))!;
    bytes[bytes.byteLength - 1] ^= 0x01;
    await store.delete([victim]);
    await store.put(victim, bytes);
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(2);
    expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' });
    expect(tier.stats().errors.KVT_ERR_BLOCK_PAYLOAD_CHECKSUM).toBe(1);
    loaded.blocks.forEach((block, i) => expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(8, i)))).toBe(true));
  });
});
