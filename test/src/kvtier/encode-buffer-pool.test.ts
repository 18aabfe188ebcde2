/**
 * Encode buffers reused after their write (encode-buffer-pool.ts): the pool
 * itself, encode into a dirty recycled buffer, and the ownership rule through
 * the tier: a block a load read from its flight, or one the hot tier took,
 * never has its buffer reused, while a block nobody saw does.
 */
import { join } from 'node:path';

import { describe, expect, it, vi } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockCodec, KvTier, ManualClock, type KvLayout } from '../../../src/kvtier/index.ts';
import { EncodeBufferPool } from '../../../src/kvtier/encode-buffer-pool.ts';
import { HeldPutsStore } from '../../helpers/held-puts-store.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

describe('EncodeBufferPool', () => {
  it('gives back buffers of the exact size, last returned first, within its budget; refuses views', () => {
    const pool = new EncodeBufferPool(100);
    const a = pool.take(40);
    expect([a.byteLength, a.byteOffset, a.buffer.byteLength]).toEqual([40, 0, 40]);
    const b = pool.take(40);
    pool.give(a);
    pool.give(b);
    expect(pool.heldBytes).toBe(80);
    pool.give(pool.take(30)); // over the budget (80 + 30 > 100): dropped
    expect(pool.heldBytes).toBe(80);
    pool.give(new Uint8Array(new ArrayBuffer(64), 8, 10)); // a view into a larger buffer: never pooled
    expect(pool.heldBytes).toBe(80);
    expect(pool.take(40)).toBe(b);
    expect(pool.take(40)).toBe(a);
    expect(pool.take(40)).not.toBe(a);
    expect(pool.heldBytes).toBe(0);
  });
});

describe('BlockCodec.encode with an allocator', () => {
  const layout: KvLayout = { layers: 1, kvHeads: 1, headDim: 4, dtype: 'f16', tokensPerBlock: 8 };
  const block = { key: new Uint8Array(16).fill(1), parentKey: new Uint8Array(16).fill(2), modelFingerprint: 'fp-é', tokens: tokensOf(8, 3), layout, payload: payloadFor(3, 0, 128) };

  it('writes the same bytes into a dirty recycled buffer as into a fresh one', async () => {
    const codec = await BlockCodec.create();
    const fresh = codec.encode(block);
    const dirty = new Uint8Array(fresh.byteLength).fill(0xa5);
    const reused = codec.encode(block, 'none', () => dirty);
    expect(reused).toBe(dirty);
    expect(Buffer.from(reused).equals(Buffer.from(fresh))).toBe(true);
    expect(codec.decode(reused).payload).toEqual(block.payload);
  });

  it('refuses a buffer of another size or one that is a view into a larger one', async () => {
    const codec = await BlockCodec.create();
    const size = codec.encode(block).byteLength;
    expect(() => codec.encode(block, 'none', () => new Uint8Array(size + 1))).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_MALFORMED' }));
    expect(() => codec.encode(block, 'none', () => new Uint8Array(new ArrayBuffer(size + 64), 64, size))).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_MALFORMED' }));
  });
});

describe('the tier reuses an encoded block buffer only when nobody else saw it', () => {
  const scope = { tenant: 'acme', trafficClass: 'chat' };

  async function withTier(hotCacheBytes: number, body: (tier: KvTier, held: HeldPutsStore) => Promise<void>): Promise<void> {
    const dir = await tempDir();
    const inner = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const held = new HeldPutsStore(inner);
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store: held, clock: new ManualClock(), logger: captureLogger(), hotCacheBytes });
    try {
      await body(tier, held);
      expect(tier.stats().errors).toEqual({});
    } finally {
      held.release();
      await tier.close();
      await inner.close();
      await dir.remove();
    }
  }

  /** Stores one-block prompts (seeds) and waits for their writes. */
  async function storeBlocks(tier: KvTier, seeds: number[]): Promise<void> {
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    for (const seed of seeds) tier.store({ namespace: ns, tokens: tokensOf(64, seed), layout: LAYOUT, ...scope, payloads: [payloadFor(seed, 0)] });
    await tier.flush();
  }

  it('a block loaded from its flight keeps its bytes after its write, however many blocks are written next', async () => {
    await withTier(0, async (tier, held) => {
      const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
      const tokens = tokensOf(64, 90);
      held.hold();
      tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: [payloadFor(90, 0)] });
      const loaded = await tier.load(await tier.lookup(ns, tokens, scope)); // served from the flight: views into the encoded block
      expect(loaded.blocks).toHaveLength(1);
      held.release();
      await tier.flush();
      await storeBlocks(tier, [91, 92, 93, 94, 95, 96]);
      expect(Buffer.from(loaded.blocks[0].payload).equals(Buffer.from(payloadFor(90, 0)))).toBe(true);
      expect(Array.from(loaded.blocks[0].tokens)).toEqual(Array.from(tokens));
    });
  });

  it('with the hot tier on, blocks it took keep their bytes and load back right', async () => {
    await withTier(64 << 20, async (tier) => {
      await storeBlocks(tier, [100, 101, 102]);
      const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
      const first = await tier.load(await tier.lookup(ns, tokensOf(64, 100), scope));
      await storeBlocks(tier, [103, 104, 105, 106]);
      expect(Buffer.from(first.blocks[0].payload).equals(Buffer.from(payloadFor(100, 0)))).toBe(true);
      for (const seed of [100, 101, 102, 103, 104, 105, 106]) {
        const loaded = await tier.load(await tier.lookup(ns, tokensOf(64, seed), scope));
        expect(Buffer.from(loaded.blocks[0].payload).equals(Buffer.from(payloadFor(seed, 0))), `seed ${seed}`).toBe(true);
      }
    });
  });

  it('a block nobody saw gives its buffer back, and the next block is encoded into it', async () => {
    const given: Uint8Array[] = [];
    const taken: Uint8Array[] = [];
    const give = EncodeBufferPool.prototype.give;
    const take = EncodeBufferPool.prototype.take;
    vi.spyOn(EncodeBufferPool.prototype, 'give').mockImplementation(function (this: EncodeBufferPool, bytes) {
      given.push(bytes);
      give.call(this, bytes);
    });
    vi.spyOn(EncodeBufferPool.prototype, 'take').mockImplementation(function (this: EncodeBufferPool, size) {
      const bytes = take.call(this, size);
      taken.push(bytes);
      return bytes;
    });
    try {
      await withTier(0, async (tier) => {
        await storeBlocks(tier, [110]);
        await storeBlocks(tier, [111]);
        expect(given).toHaveLength(2);
        expect(taken).toHaveLength(2);
        expect(taken[1]).toBe(given[0]);
        const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
        for (const seed of [110, 111]) {
          const loaded = await tier.load(await tier.lookup(ns, tokensOf(64, seed), scope));
          expect(Buffer.from(loaded.blocks[0].payload).equals(Buffer.from(payloadFor(seed, 0))), `seed ${seed}`).toBe(true);
        }
      });
    } finally {
      vi.restoreAllMocks();
    }
  });
});
