/**
 * The hit path's concurrency: `KvTier.load` reads a prefix's blocks with a
 * bounded number of reads in flight, returns them in prompt order whatever
 * order the reads finish in, stops at exactly the first block that fails
 * (the verified contiguous prefix, nothing past it) and fills the hot tier.
 *
 * The store is a real FsBlobStore behind a gate that holds chosen `get`s
 * until the test lets them go (timing control, the bytes are the store's).
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, type KvTierOptions } from '../../../src/kvtier/index.ts';
import { ForwardingStore } from '../../helpers/forwarding-store.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

/** Forwards to a real store; `get`s of held keys wait until released; counts reads in flight. */
class GatedStore extends ForwardingStore {
  inFlight = 0;
  maxInFlight = 0;
  readonly started: string[] = [];
  private readonly held = new Map<string, { promise: Promise<void>; release: () => void }>();

  hold(key: string): void {
    let release!: () => void;
    const promise = new Promise<void>((resolve) => (release = resolve));
    this.held.set(key, { promise, release });
  }

  releaseAll(): void {
    for (const { release } of this.held.values()) release();
    this.held.clear();
  }

  override async get(key: string): Promise<Uint8Array | null> {
    this.started.push(key);
    this.inFlight++;
    this.maxInFlight = Math.max(this.maxInFlight, this.inFlight);
    try {
      await this.held.get(key)?.promise;
      return await this.inner.get(key);
    } finally {
      this.inFlight--;
    }
  }
}

const scope = { tenant: 'acme', trafficClass: 'chat' };

describe('KvTier.load: concurrent, ordered, verified', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let store: GatedStore;
  const tiers: KvTier[] = [];

  const openTier = async (extra: Partial<KvTierOptions> = {}) => {
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, logger: captureLogger(), touchIntervalMs: 0, ...extra });
    tiers.push(tier);
    return tier;
  };
  const stored = async (tier: KvTier, blocks: number, seed: number) => {
    const namespace = tier.namespace({ modelFingerprint: 'load-test', tenantSalt: 'acme' });
    const tokens = tokensOf(64 * blocks, seed);
    tier.store({ namespace, tokens, layout: LAYOUT, ...scope, payloads: Array.from({ length: blocks }, (_, b) => payloadFor(seed, b)) });
    await tier.flush();
    const hit = await tier.lookup(namespace, tokens, scope);
    expect(hit.hitBlocks).toBe(blocks);
    return hit;
  };

  beforeEach(async () => {
    dir = await tempDir('kvtier-load-');
    store = new GatedStore(await FsBlobStore.open({ dir: join(dir.path, 'blocks') }));
  });

  afterEach(async () => {
    store.releaseAll();
    for (const tier of tiers.splice(0)) await tier.close();
    await store.close();
    await dir.remove();
  });

  it('reads with at most readConcurrency gets in flight and returns blocks in prompt order when later reads finish first', async () => {
    const tier = await openTier({ hotCacheBytes: 0, readConcurrency: 6 });
    const hit = await stored(tier, 20, 3);
    store.started.length = 0;
    store.hold(hit.keys[0]);
    store.hold(hit.keys[1]);
    const loading = tier.load(hit);
    // Blocks 2.. are read and verified while 0 and 1 wait.
    await waitFor(() => store.started.length === 20 && store.inFlight === 2);
    store.releaseAll();
    const loaded = await loading;
    expect(store.maxInFlight).toBe(6);
    expect(loaded.stoppedAt).toBeUndefined();
    expect(loaded.blocks.map((b) => b.index)).toEqual(Array.from({ length: 20 }, (_, i) => i));
    for (const block of loaded.blocks) {
      expect(block.key).toBe(hit.keys[block.index]);
      expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(3, block.index)))).toBe(true);
    }
  });

  it('a corrupt block in the middle yields exactly the verified prefix before it, though the blocks after it verified first', async () => {
    const tier = await openTier({ hotCacheBytes: 0, readConcurrency: 8 });
    const hit = await stored(tier, 24, 4);
    const victim = hit.keys[9];
    const bytes = (await store.get(victim))!;
    bytes[bytes.byteLength - 1] ^= 0x01; // last payload byte
    await store.put(victim, bytes);
    store.started.length = 0;
    store.maxInFlight = 0;
    // Blocks 0..4 and the victim wait; the other reads run through to the end of the prompt.
    for (let i = 0; i < 5; i++) store.hold(hit.keys[i]);
    store.hold(victim);
    const loading = tier.load(hit);
    await waitFor(() => store.started.length === 24 && store.inFlight === 6);
    store.releaseAll();
    const loaded = await loading;
    expect(store.maxInFlight).toBeLessThanOrEqual(8);
    expect(loaded.blocks.map((b) => b.index)).toEqual([0, 1, 2, 3, 4, 5, 6, 7, 8]);
    expect(loaded.tokenCount).toBe(9 * 64);
    expect(loaded.stoppedAt).toEqual({ block: 9, code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' });
    for (const block of loaded.blocks) expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(4, block.index)))).toBe(true);
    expect(tier.stats().loadFailedBlocks).toBe(24 - 9);
    expect(tier.stats().loadedBlocks).toBe(9);
    await tier.flush();
    expect((await store.has([victim]))[0]).toBe(false); // corrupt blob deleted
  });

  it('starts no read past a failure once it is known', async () => {
    const tier = await openTier({ hotCacheBytes: 0, readConcurrency: 2 });
    const hit = await stored(tier, 16, 6);
    await store.delete([hit.keys[3]]); // in the index, gone from storage
    store.started.length = 0;
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(3);
    expect(loaded.stoppedAt).toEqual({ block: 3, code: 'KVT_ERR_BLOCK_MISSING' });
    // 0..3, plus at most the one read the other reader had already started.
    expect(store.started.length).toBeLessThanOrEqual(5);
  });

  it('fills the hot tier: the next load of the same prefix reads nothing from storage', async () => {
    const tier = await openTier({ hotCacheBytes: 4 << 20 });
    const hit = await stored(tier, 12, 5);
    // The write path put them in RAM already; start from storage.
    const cold = await openTier({ hotCacheBytes: 4 << 20, dataDir: join(dir.path, 'node-b') });
    const coldHit = await cold.lookup(cold.namespace({ modelFingerprint: 'load-test', tenantSalt: 'acme' }), hit.tokens, scope);
    expect((await cold.load(coldHit)).blocks).toHaveLength(12);
    const readAfterFirst = cold.stats().bytesRead;
    expect(readAfterFirst).toBeGreaterThan(0);
    store.started.length = 0;
    const again = await cold.load(coldHit);
    expect(again.blocks).toHaveLength(12);
    expect(store.started).toEqual([]);
    expect(cold.stats().bytesRead).toBe(readAfterFirst);
    expect(cold.stats().hotCacheHits).toBe(12);
  });
});

async function waitFor(condition: () => boolean): Promise<void> {
  for (let i = 0; i < 2000 && !condition(); i++) await new Promise((resolve) => setTimeout(resolve, 5));
  expect(condition()).toBe(true);
}
