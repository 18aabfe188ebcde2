/**
 * BlockFlights (src/kvtier/block-flights.ts), the one registry of blocks in
 * flight: its states on their own, then on a real KvTier whose storage puts
 * are held, so a block stays "being written" while the test looks at it.
 */
import { join } from 'node:path';

import { afterEach, beforeEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockFlights, KvTier, ManualClock, reuseGapBucket } from '../../../src/kvtier/index.ts';
import { HeldPutsStore } from '../../helpers/held-puts-store.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

describe('BlockFlights', () => {
  it('the earliest unfinished claimant owns a block; it is forgotten once unowned and no lookup needs its tick', () => {
    const flights = new BlockFlights();
    const a = {};
    const b = {};
    flights.claim('k', a);
    flights.claim('k', b);
    expect(flights.ownerOf('k')).toBe(a);
    flights.release(a, ['k']);
    expect(flights.ownerOf('k')).toBeNull();
    flights.claim('k', b);
    expect(flights.ownerOf('k')).toBe(b);
    const lookupTick = flights.tick;
    flights.stored('k', flights.nextTick());
    expect(flights.storedTickOf('k')).toBeGreaterThan(lookupTick);
    flights.release(b, ['k']);
    // A lookup that started before the store is still in flight: the tick stays.
    flights.prune(lookupTick);
    expect(flights.storedTickOf('k')).toBeGreaterThan(lookupTick);
    expect(flights.claimed).toBe(1);
    flights.prune(Infinity);
    expect(flights.claimed).toBe(0);
    expect(flights.storedTickOf('k')).toBe(0);
  });

  it('a block is readable from the store call that queued it until its write ends, owned or not', () => {
    const flights = new BlockFlights();
    const bytes = new Uint8Array([1, 2, 3]);
    const owner = {};
    flights.claim('owned', owner);
    const tick = flights.nextTick();
    flights.stored('owned', tick, bytes);
    flights.stored('reply', tick, bytes);
    expect(flights.readable('owned')).toBe(true);
    expect(flights.bytesOf('reply')).toBe(bytes);
    // Ended owners and pruned ticks do not drop a block still being written; being written is not a claim.
    flights.release(owner, ['owned']);
    flights.prune(Infinity);
    expect(flights.readable('owned')).toBe(true);
    expect(flights.claimed).toBe(0);
    flights.written('owned');
    flights.written('reply');
    expect(flights.readable('owned')).toBe(false);
    expect(flights.bytesOf('reply')).toBeUndefined();
  });
});

describe('BlockFlights in the tier', () => {
  let dir: { path: string; remove: () => Promise<void> };
  let fs: FsBlobStore;
  let store: HeldPutsStore;
  let tier: KvTier;

  beforeEach(async () => {
    dir = await tempDir('kvtier-flights-');
    fs = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    store = new HeldPutsStore(fs);
    store.hold();
    tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, blockTokens: 64, hotCacheBytes: 0, metadataRedisUrl: '', logger: captureLogger() });
  });

  afterEach(async () => {
    store.release();
    await tier.close();
    await fs.close();
    await dir.remove();
  });

  it('a block handed to store is a hit read from the registry while its write is held, then from storage; the registry forgets it', async () => {
    const ns = tier.namespace({ modelFingerprint: 'm', tenantSalt: '01' });
    const scope = { tenant: 't', trafficClass: 'chat' };
    const tokens = tokensOf(3 * 64, 7);
    const payloads = [0, 1, 2].map((i) => payloadFor(7, i));
    expect(tier.store({ namespace: ns, tokens, payloads, layout: LAYOUT, ...scope }).queued).toBe(3);
    const first = await tier.lookup(ns, tokens, scope);
    expect(first.hitBlocks).toBe(3);
    for (let i = 0; i < 3; i++) expect(tier.flights.readable(first.chain.keyHex(i))).toBe(true);
    expect(await fs.has(first.keys)).toEqual([false, false, false]);
    const loaded = await tier.load(first);
    expect(loaded.blocks.map((b) => b.payload)).toEqual(payloads);
    expect(tier.stats().bytesRead).toBe(0);
    loaded.release();
    store.release();
    await tier.flush();
    for (let i = 0; i < 3; i++) expect(tier.flights.readable(first.chain.keyHex(i))).toBe(false);
    expect(tier.flights.claimed).toBe(0);
    const second = await tier.lookup(ns, tokens, scope);
    expect(second.hitBlocks).toBe(3);
    const again = await tier.load(second);
    expect(again.blocks.map((b) => b.payload)).toEqual(payloads);
    expect(tier.stats().bytesRead).toBeGreaterThan(0);
    again.release();
  });

  it('a hit on a block still being written renews it and records its reuse gap; a store of it while in flight renews it too', async () => {
    store.release();
    await tier.close();
    store.hold();
    const DAY = 86_400_000;
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    tier = await KvTier.open({ dataDir: join(dir.path, 'node2'), store, blockTokens: 64, hotCacheBytes: 0, metadataRedisUrl: '', logger: captureLogger(), clock, touchIntervalMs: 0 });
    const ttl = tier.policy.current().ttlMs('chat', 't');
    const ns = tier.namespace({ modelFingerprint: 'm', tenantSalt: '02' });
    const scope = { tenant: 't', trafficClass: 'chat' };
    const tokens = tokensOf(2 * 64, 9);
    const payloads = [0, 1].map((i) => payloadFor(9, i));
    const t0 = clock.now();
    expect(tier.store({ namespace: ns, tokens, payloads, layout: LAYOUT, ...scope }).queued).toBe(2);
    // Held: both blocks are being written. A hit 10 s later counts a 10 s gap per block.
    clock.set(t0 + 10_000);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(2);
    const gaps = tier.stats().reuseGaps.byClass.chat;
    expect(gaps?.blocks[reuseGapBucket(10_000)]).toBe(2);
    expect(gaps?.tokens.reduce((a, b) => a + b, 0)).toBe(2 * 64);
    // Still being written a TTL minus a minute later: a store of it is a use as well.
    clock.set(t0 + ttl - 60_000);
    expect(tier.store({ namespace: ns, tokens, payloads, layout: LAYOUT, ...scope }).duplicate).toBe(2);
    store.release();
    await tier.flush();
    // The write lands: the index and the plane keep the latest use, so a lookup past the store time's TTL still hits.
    clock.set(t0 + ttl + DAY);
    const later = await tier.lookup(ns, tokens, scope);
    expect(later.hitBlocks).toBe(2);
    expect(tier.stats().reuseGaps.byClass.chat?.blocks[reuseGapBucket(DAY + 60_000)]).toBe(2);
    // And it expires a TTL after that last use, judged while being written too.
    clock.set(t0 + 2 * ttl + 2 * DAY);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(0);
  });

  it('a block being written expires for a lookup once its TTL has run out since its last use', async () => {
    store.release();
    await tier.close();
    store.hold();
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    tier = await KvTier.open({ dataDir: join(dir.path, 'node3'), store, blockTokens: 64, hotCacheBytes: 0, metadataRedisUrl: '', logger: captureLogger(), clock, touchIntervalMs: 0 });
    const ttl = tier.policy.current().ttlMs('chat', 't');
    const ns = tier.namespace({ modelFingerprint: 'm', tenantSalt: '03' });
    const scope = { tenant: 't', trafficClass: 'chat' };
    const tokens = tokensOf(64, 11);
    tier.store({ namespace: ns, tokens, payloads: [payloadFor(11, 0)], layout: LAYOUT, ...scope });
    clock.set(clock.now() + ttl);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(0);
    store.release();
  });
});
