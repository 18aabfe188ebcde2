/**
 * KvTier behaviour over a real BlobStore. Run by kv-tier-fs.test.ts and
 * kv-tier-s3.test.ts with their own store.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import xxhash from 'xxhash-wasm';

import type { BlobStore } from '../../../storage-adapters/index.ts';
import { DAY_MS, KvTier, ManualClock, PrefixHasher, type KvTierOptions, type Hash128 } from '../../../src/kvtier/index.ts';
import { BLOCK_PAYLOAD_BYTES, LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

export interface StoreFixture {
  /** A fresh, empty store (each call may return another handle on the same location). */
  open(): Promise<BlobStore>;
  dispose(): Promise<void>;
}

const FINGERPRINT = 'test-model-fp';

/** `tierOptions`: given to every tier the suite opens (a node index kind, say). */
export function runKvTierSuite(name: string, makeFixture: () => Promise<StoreFixture>, tierOptions: Partial<KvTierOptions> = {}): void {
  describe(`KvTier over ${name}`, () => {
    let fixture: StoreFixture;
    let dir: { path: string; remove: () => Promise<void> };
    let store: BlobStore;
    let clock: ManualClock;
    const tiers: KvTier[] = [];
    let logger: ReturnType<typeof captureLogger>;

    const openTier = async (node = 'node-a', extra: Partial<KvTierOptions> = {}): Promise<KvTier> => {
      const tier = await KvTier.open({ dataDir: join(dir.path, node), store, clock, logger, touchIntervalMs: 0, ...tierOptions, ...extra });
      tiers.push(tier);
      return tier;
    };
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const storeAll = (tier: KvTier, tokens: Uint32Array, seed: number, extra: Partial<Parameters<KvTier['store']>[0]> = {}) => {
      const ns = tier.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: 'acme' });
      const blocks = Math.floor(tokens.length / 64);
      return tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: Array.from({ length: blocks }, (_, b) => payloadFor(seed, b)), ...extra });
    };
    const nsOf = (tier: KvTier, salt = 'acme') => tier.namespace({ modelFingerprint: FINGERPRINT, tenantSalt: salt });

    beforeEach(async () => {
      fixture = await makeFixture();
      store = await fixture.open();
      dir = await tempDir();
      clock = new ManualClock();
      logger = captureLogger();
    });

    afterEach(async () => {
      for (const tier of tiers.splice(0)) await tier.close();
      await store.close();
      await fixture.dispose();
      await dir.remove();
    });

    it('stores full blocks write-behind and serves them back verified, byte for byte', async () => {
      const tier = await openTier();
      const tokens = tokensOf(64 * 6 + 30, 1);
      const ns = nsOf(tier);
      const miss = await tier.lookup(ns, tokens, scope);
      expect(miss.hitBlocks).toBe(0);
      expect(miss.totalBlocks).toBe(6);
      const receipt = storeAll(tier, tokens, 1);
      expect(receipt).toEqual({ queued: 6, duplicate: 0, dropped: 0 });
      await tier.flush();
      const hit = await tier.lookup(ns, tokens, scope);
      expect(hit.hitBlocks).toBe(6);
      expect(hit.hitTokens).toBe(384);
      expect(hit.keys).toHaveLength(6);
      const loaded = await tier.load(hit);
      expect(loaded.tokenCount).toBe(384);
      expect(loaded.stoppedAt).toBeUndefined();
      loaded.blocks.forEach((block, b) => {
        expect(block.index).toBe(b);
        expect(block.key).toBe(hit.keys[b]);
        expect(Array.from(block.tokens)).toEqual(Array.from(tokens.subarray(b * 64, (b + 1) * 64)));
        expect(Buffer.from(block.payload).equals(Buffer.from(payloadFor(1, b)))).toBe(true);
        expect(block.layout).toEqual(LAYOUT);
      });
      const stats = tier.stats();
      expect(stats.blocksWritten).toBe(6);
      expect(stats.lookups).toBe(2);
      expect(stats.hitBlocks).toBe(6);
      expect(stats.missBlocks).toBe(6);
      expect(stats.errors).toEqual({});
    });

    it('finds the longest cached prefix and extends it with fromBlock', async () => {
      const tier = await openTier();
      const ns = nsOf(tier);
      const first = tokensOf(64 * 3, 2);
      storeAll(tier, first, 2);
      await tier.flush();
      const longer = new Uint32Array(64 * 5 + 1);
      longer.set(first);
      longer.set(tokensOf(64 * 2 + 1, 3), 64 * 3);
      const partial = await tier.lookup(ns, longer, scope);
      expect(partial.hitBlocks).toBe(3);
      const receipt = tier.store({
        namespace: ns,
        tokens: longer,
        fromBlock: partial.hitBlocks,
        layout: LAYOUT,
        ...scope,
        payloads: [payloadFor(9, 3), payloadFor(9, 4)],
        chain: partial.chain,
      });
      expect(receipt.queued).toBe(2);
      await tier.flush();
      const full = await tier.load(await tier.lookup(ns, longer, scope));
      expect(full.blocks.map((block) => block.payload[0])).toEqual([0, 1, 2, 3, 4].map((b) => (b < 3 ? payloadFor(2, b) : payloadFor(9, b))[0]));
      // A prompt that diverges inside block 1 hits block 0 only.
      const diverging = longer.slice();
      diverging[64 + 10] += 1;
      expect((await tier.lookup(ns, diverging, scope)).hitBlocks).toBe(1);
      // Another tenant's namespace never hits.
      expect((await tier.lookup(nsOf(tier, 'other-tenant'), longer, { ...scope, tenant: 'other' })).hitBlocks).toBe(0);
    });

    it('serves blocks still in the write-behind queue to the next lookup (single flight)', async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 0 });
      const tokens = tokensOf(64 * 4, 28);
      storeAll(tier, tokens, 28);
      const hit = await tier.lookup(nsOf(tier), tokens, scope); // no flush: writes may still be in flight
      expect(hit.hitBlocks).toBe(4);
      const loaded = await tier.load(hit);
      expect(loaded.blocks.map((block) => Buffer.from(block.payload).equals(Buffer.from(payloadFor(28, block.index))))).toEqual([true, true, true, true]);
      await tier.flush();
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(4);
      expect(tier.stats().errors).toEqual({});
    });

    it('de-duplicates blocks in flight and already stored', async () => {
      const tier = await openTier();
      const tokens = tokensOf(64 * 4, 4);
      expect(storeAll(tier, tokens, 4).queued).toBe(4);
      expect(storeAll(tier, tokens, 4)).toEqual({ queued: 0, duplicate: 4, dropped: 0 });
      await tier.flush();
      expect(storeAll(tier, tokens, 4)).toEqual({ queued: 0, duplicate: 4, dropped: 0 });
      expect(tier.stats().blocksWritten).toBe(4);
      expect(tier.stats().writeBehind.duplicateBlocks).toBe(8);
    });

    it('bounds write-behind memory: drops and counts what does not fit, never waits', async () => {
      const estimate = BLOCK_PAYLOAD_BYTES + 1024 + FINGERPRINT.length;
      const tier = await openTier('node-a', { writeBehindMaxBytes: 3 * estimate });
      const tokens = tokensOf(64 * 10, 5);
      const receipt = storeAll(tier, tokens, 5);
      expect(receipt).toEqual({ queued: 3, duplicate: 0, dropped: 7 });
      expect(tier.stats().writeBehind.queuedBytes).toBeLessThanOrEqual(3 * estimate);
      await tier.flush();
      const stats = tier.stats();
      expect(stats.writeBehind.droppedBlocks).toBe(7);
      expect(stats.writeBehind.queuedBytes).toBe(0);
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(3);
    });

    it('takes payloads from a callback when the writer gets to them', async () => {
      const tier = await openTier();
      const tokens = tokensOf(64 * 3 + 5, 6);
      const asked: number[] = [];
      const receipt = tier.store({
        namespace: nsOf(tier),
        tokens,
        layout: LAYOUT,
        ...scope,
        payloads: async (b) => {
          asked.push(b);
          return payloadFor(6, b);
        },
      });
      expect(receipt.queued).toBe(3);
      await tier.flush();
      expect(asked.sort()).toEqual([0, 1, 2]);
      const loaded = await tier.load(await tier.lookup(nsOf(tier), tokens, scope));
      expect(loaded.blocks.map((block) => block.payload[5])).toEqual([0, 1, 2].map((b) => payloadFor(6, b)[5]));
    });

    it('finds blocks written by another node through the shared store and adopts them', async () => {
      const writer = await openTier('node-a');
      const reader = await openTier('node-b');
      const tokens = tokensOf(64 * 40, 7);
      storeAll(writer, tokens, 7);
      await writer.flush();
      const first = await reader.lookup(nsOf(reader), tokens, scope);
      expect(first.hitBlocks).toBe(40);
      expect(first.adoptedBlocks).toBe(40);
      const loaded = await reader.load(first);
      expect(loaded.tokenCount).toBe(40 * 64);
      expect(Buffer.from(loaded.blocks[39].payload).equals(Buffer.from(payloadFor(7, 39)))).toBe(true);
      await reader.flush();
      const second = await reader.lookup(nsOf(reader), tokens, scope);
      expect(second.hitBlocks).toBe(40);
      expect(second.adoptedBlocks).toBe(0);
      expect(reader.usage().bytes.g).toBeGreaterThan(40 * BLOCK_PAYLOAD_BYTES);
    });

    it('serves repeated loads from the hot cache', async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 1 << 20 });
      const tokens = tokensOf(64 * 3, 8);
      storeAll(tier, tokens, 8);
      await tier.flush();
      const before = tier.stats().bytesRead;
      await tier.load(await tier.lookup(nsOf(tier), tokens, scope));
      expect(tier.stats().hotCacheHits).toBe(3);
      expect(tier.stats().bytesRead).toBe(before);
    });

    it('a corrupt block ends the load there: earlier blocks served, bad blob deleted, error counted', async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 0 });
      const tokens = tokensOf(64 * 5, 9);
      storeAll(tier, tokens, 9);
      await tier.flush();
      const hit = await tier.lookup(nsOf(tier), tokens, scope);
      const victim = hit.keys[2];
      const bytes = (await store.get(victim))!;
      bytes[bytes.byteLength - 100] ^= 0x10;
      await store.put(victim, bytes);
      const loaded = await tier.load(hit);
      expect(loaded.blocks).toHaveLength(2);
      expect(loaded.tokenCount).toBe(128);
      expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM' });
      await tier.flush();
      expect((await store.has([victim]))[0]).toBe(false);
      expect(tier.stats().errors.KVT_ERR_BLOCK_PAYLOAD_CHECKSUM).toBe(1);
      expect(tier.stats().loadFailedBlocks).toBe(3);
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(2);
    });

    it('a truncated or wrong-version file is a miss, never partial data', async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 0 });
      const tokens = tokensOf(64 * 3, 10);
      storeAll(tier, tokens, 10);
      await tier.flush();
      const hit = await tier.lookup(nsOf(tier), tokens, scope);
      const first = (await store.get(hit.keys[0]))!;
      await store.put(hit.keys[0], first.slice(0, first.byteLength - 1));
      const truncated = await tier.load(hit);
      expect(truncated.blocks).toHaveLength(0);
      expect(truncated.stoppedAt?.code).toBe('KVT_ERR_BLOCK_TRUNCATED');

      const tier2Tokens = tokensOf(64 * 2, 11);
      storeAll(tier, tier2Tokens, 11);
      await tier.flush();
      const hit2 = await tier.lookup(nsOf(tier), tier2Tokens, scope);
      const bytes = (await store.get(hit2.keys[1]))!;
      new DataView(bytes.buffer, bytes.byteOffset).setUint16(4, 99, true);
      await store.put(hit2.keys[1], bytes);
      const wrongVersion = await tier.load(hit2);
      expect(wrongVersion.blocks).toHaveLength(1);
      expect(wrongVersion.stoppedAt?.code).toBe('KVT_ERR_BLOCK_VERSION');
      expect(tier.stats().errors.KVT_ERR_BLOCK_VERSION).toBe(1);
    });

    it("a file overwritten with another prefix's block under the same key is a miss, not that block's data", async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 0 });
      const a = tokensOf(64 * 2, 12);
      const b = tokensOf(64 * 2, 13);
      storeAll(tier, a, 12);
      storeAll(tier, b, 13);
      await tier.flush();
      const hitA = await tier.lookup(nsOf(tier), a, scope);
      const hitB = await tier.lookup(nsOf(tier), b, scope);
      await store.put(hitA.keys[0], (await store.get(hitB.keys[0]))!);
      const loaded = await tier.load(hitA);
      expect(loaded.blocks).toHaveLength(0);
      expect(loaded.stoppedAt?.code).toBe('KVT_ERR_BLOCK_KEY_MISMATCH');
    });

    it('a forced hash collision (injected hash) is a miss, never the other prefix', async () => {
      // Hashes only the parent key, ignoring the tokens: every prompt of a namespace gets the same chain.
      const api = await xxhash();
      const collide: Hash128 = (input, out, offset) => {
        const view = new DataView(out.buffer, out.byteOffset + offset, 16);
        view.setBigUint64(0, api.h64Raw(input.subarray(0, 16), 1n));
        view.setBigUint64(8, api.h64Raw(input.subarray(0, 16), 2n));
      };
      const tier = await openTier('node-a', { hash128: collide, hotCacheBytes: 1 << 20 });
      const a = tokensOf(64 * 3, 14);
      const b = tokensOf(64 * 3, 15);
      storeAll(tier, a, 14);
      await tier.flush();
      const hitB = await tier.lookup(nsOf(tier), b, scope);
      expect(hitB.hitBlocks).toBe(3); // the index cannot tell…
      const loaded = await tier.load(hitB);
      expect(loaded.blocks).toHaveLength(0); // …the verified load can
      expect(['KVT_ERR_BLOCK_TOKEN_MISMATCH', 'KVT_ERR_BLOCK_PARENT_MISMATCH']).toContain(loaded.stoppedAt?.code);
      // The owner's blocks are kept and still served to the owner.
      const loadedA = await tier.load(await tier.lookup(nsOf(tier), a, scope));
      expect(loadedA.blocks).toHaveLength(3);
      expect(Buffer.from(loadedA.blocks[2].payload).equals(Buffer.from(payloadFor(14, 2)))).toBe(true);
    });

    it('expires chat after 7 days and agent after 3 days, sliding from the last use', async () => {
      const tier = await openTier();
      const chat = tokensOf(64 * 2, 16);
      const agent = tokensOf(64 * 2, 17);
      storeAll(tier, chat, 16);
      storeAll(tier, agent, 17, { trafficClass: 'agent' });
      await tier.flush();
      const agentScope = { ...scope, trafficClass: 'agent' };
      clock.advance(3 * DAY_MS - 1);
      expect((await tier.lookup(nsOf(tier), agent, agentScope)).hitBlocks).toBe(2); // a use: renews
      await tier.flush();
      clock.advance(3 * DAY_MS - 1); // 6 d after write, just under 3 d after use
      expect((await tier.lookup(nsOf(tier), agent, agentScope)).hitBlocks).toBe(2);
      await tier.flush();
      expect((await tier.lookup(nsOf(tier), chat, scope)).hitBlocks).toBe(2); // chat: 6 d < 7 d
      await tier.flush();
      clock.advance(3 * DAY_MS); // agent last used 3 d ago → expired
      expect((await tier.lookup(nsOf(tier), agent, agentScope)).hitBlocks).toBe(0);
      clock.advance(4 * DAY_MS); // chat last used 7 d ago
      expect((await tier.lookup(nsOf(tier), chat, scope)).hitBlocks).toBe(0);
    });

    it('an expired block is a miss even though GC has not deleted its blob yet', async () => {
      const tier = await openTier();
      const tokens = tokensOf(64 * 2, 18);
      storeAll(tier, tokens, 18);
      await tier.flush();
      const keys = (await tier.lookup(nsOf(tier), tokens, scope)).keys;
      clock.advance(7 * DAY_MS);
      expect(await store.has(keys)).toEqual([true, true]);
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(0);
    });

    it('GC deletes expired blocks from storage and index and reports them by class and reason; dry run changes nothing', async () => {
      const tier = await openTier();
      storeAll(tier, tokensOf(64 * 3, 19), 19, { trafficClass: 'agent' });
      storeAll(tier, tokensOf(64 * 2, 20), 20);
      await tier.flush();
      clock.advance(4 * DAY_MS);
      const dry = await tier.gc({ dryRun: true });
      expect(dry.removed.expired.blocks).toBe(3);
      expect(dry.byClass.agent.expired.blocks).toBe(3);
      expect(dry.byClass.chat).toBeUndefined();
      expect(tier.usage().blocks.g).toBe(5);
      const progress: string[] = [];
      const report = await tier.gc({ onProgress: (p) => progress.push(p.phase) });
      expect(report.removed.expired).toEqual({ blocks: 3, bytes: dry.removed.expired.bytes });
      expect(report.removed.expired.bytes).toBeGreaterThan(3 * BLOCK_PAYLOAD_BYTES);
      expect(report.removed.evicted.blocks).toBe(0);
      expect(report.remaining.blocks).toBe(2);
      expect(progress).toContain('expire');
      expect(tier.usage().blocks.g).toBe(2);
      expect(tier.stats().gc.expired.blocks).toBe(3);
      const left: string[] = [];
      for await (const key of store.list()) left.push(key);
      expect(left).toHaveLength(2);
    });

    it('GC evicts least recently used blocks while over the byte quota (deepest first among equals)', async () => {
      const tier = await openTier();
      const a = tokensOf(64 * 2, 21);
      const b = tokensOf(64 * 2, 22);
      const c = tokensOf(64 * 2, 23);
      storeAll(tier, a, 21);
      await tier.flush();
      clock.advance(1000);
      storeAll(tier, b, 22);
      await tier.flush();
      clock.advance(1000);
      storeAll(tier, c, 23);
      await tier.flush();
      clock.advance(1000);
      await tier.lookup(nsOf(tier), a, scope); // a is now the most recent
      await tier.flush();
      const blockBytes = tier.usage().bytes.g / 6;
      await tier.policy.update((doc) => {
        doc.quotaBytes = Math.floor(blockBytes * 3.5);
      });
      const hasher = await PrefixHasher.create();
      const chainB = hasher.chain(nsOf(tier).keyBytes, b);
      const keysB = [chainB.keyHex(0), chainB.keyHex(1)];
      const report = await tier.gc();
      expect(report.removed.evicted.blocks).toBe(3); // b's two blocks, then c's second block
      expect(report.byClass.chat.evicted.blocks).toBe(3);
      expect(await store.has(keysB)).toEqual([false, false]);
      expect((await tier.lookup(nsOf(tier), a, scope)).hitBlocks).toBe(2);
      expect((await tier.lookup(nsOf(tier), c, scope)).hitBlocks).toBe(1);
      expect(tier.usage().bytes.g).toBeLessThanOrEqual(blockBytes * 3.5);
    });

    it('applies per-tenant TTL overrides and per-class quotas', async () => {
      const tier = await openTier();
      await tier.policy.update((doc) => {
        doc.tenants.vip = { ttlMs: { chat: 30 * DAY_MS } };
      });
      const vipScope = { tenant: 'vip', trafficClass: 'chat' };
      const tokens = tokensOf(64, 24);
      const vipNs = nsOf(tier, 'vip');
      tier.store({ namespace: vipNs, tokens, layout: LAYOUT, ...vipScope, payloads: [payloadFor(24, 0)] });
      storeAll(tier, tokens, 24);
      await tier.flush();
      clock.advance(8 * DAY_MS);
      expect((await tier.lookup(vipNs, tokens, vipScope)).hitBlocks).toBe(1);
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(0);
      const report = await tier.gc();
      expect(report.removed.expired.blocks).toBe(1);
      expect(tier.usage().blocks['t:vip']).toBe(1);
      // A class quota of 0 evicts the whole class.
      await tier.policy.update((doc) => {
        doc.classes.chat.quotaBytes = 0;
      });
      const evicted = await tier.gc();
      expect(evicted.removed.evicted.blocks).toBe(1);
      expect(evicted.rebasedEntries).toBeGreaterThanOrEqual(0);
      expect(tier.usage().blocks.g ?? 0).toBe(0);
    });

    it("an index entry whose blob is gone (another node's GC, a crash mid-GC) reads as a miss and is cleaned", async () => {
      const tier = await openTier('node-a', { hotCacheBytes: 0 });
      const tokens = tokensOf(64 * 3, 26);
      storeAll(tier, tokens, 26);
      await tier.flush();
      const hit = await tier.lookup(nsOf(tier), tokens, scope);
      await store.delete([hit.keys[1]]);
      const loaded = await tier.load(hit);
      expect(loaded.blocks).toHaveLength(1);
      expect(loaded.stoppedAt?.code).toBe('KVT_ERR_BLOCK_MISSING');
      await tier.flush();
      expect(tier.usage().blocks.g).toBe(2);
      expect((await tier.lookup(nsOf(tier), tokens, scope)).hitBlocks).toBe(1);
    });

    it('GC dry run reports evictions without changing anything', async () => {
      const tier = await openTier();
      storeAll(tier, tokensOf(64 * 4, 27), 27);
      await tier.flush();
      const total = tier.usage().bytes.g;
      await tier.policy.update((doc) => {
        doc.quotaBytes = Math.floor(total / 2);
      });
      const dry = await tier.gc({ dryRun: true });
      expect(dry.dryRun).toBe(true);
      expect(dry.removed.evicted.blocks).toBe(2);
      expect(dry.remaining.bytes).toBeLessThanOrEqual(total / 2);
      expect(tier.usage().bytes.g).toBe(total);
      let listed = 0;
      for await (const _ of store.list()) listed++;
      expect(listed).toBe(4);
      const real = await tier.gc();
      expect(real.removed.evicted).toEqual(dry.removed.evicted);
    });

    it('rejects bad arguments with typed errors', async () => {
      const tier = await openTier();
      const tokens = tokensOf(64, 25);
      await expect(tier.lookup(nsOf(tier), tokens, { tenant: 'acme', trafficClass: 'batch' })).rejects.toMatchObject({ code: 'KVT_ERR_POLICY_UNKNOWN_CLASS' });
      expect(() => tier.store({ namespace: nsOf(tier), tokens, layout: LAYOUT, ...scope, payloads: [new Uint8Array(5)] })).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_KVTIER_BAD_REQUEST', field: 'payloads' }),
      );
      expect(() => tier.store({ namespace: nsOf(tier), tokens, layout: { ...LAYOUT, tokensPerBlock: 32 }, ...scope, payloads: [] })).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_KVTIER_BAD_REQUEST', field: 'layout' }),
      );
      expect(() => tier.store({ namespace: nsOf(tier), tokens, layout: LAYOUT, ...scope, payloads: [payloadFor(1, 0), payloadFor(1, 1)] })).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_KVTIER_BAD_REQUEST', field: 'fromBlock' }),
      );
      await expect(KvTier.open({ dataDir: '', store })).rejects.toMatchObject({ code: 'KVT_ERR_KVTIER_BAD_CONFIG', field: 'dataDir' });
    });
  });
}
