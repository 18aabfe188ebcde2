import { writeFile } from 'node:fs/promises';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { DAY_MS, KvTier, ManualClock } from '../../../src/kvtier/index.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';
import { runKvTierSuite } from './kv-tier-suite.ts';

runKvTierSuite('an fs store', async () => {
  const dir = await tempDir('kvtier-fs-store-');
  return {
    open: () => FsBlobStore.open({ dir: join(dir.path, 'blocks') }),
    dispose: () => dir.remove(),
  };
});

describe('KvTier with an unusable fs store', () => {
  it('reports misses and counts errors; nothing throws to the caller', async () => {
    const dir = await tempDir();
    const logger = captureLogger();
    const goodStore = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const tokens = tokensOf(64 * 3, 30);
    const writer = await KvTier.open({ dataDir: join(dir.path, 'node'), store: goodStore, logger });
    const ns = writer.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    writer.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: [0, 1, 2].map((b) => payloadFor(30, b)), toBlock: 3 });
    await writer.flush();
    await writer.close();

    // The store's directory runs through a regular file: every operation fails (ENOTDIR), as when a mount is broken.
    await writeFile(join(dir.path, 'not-a-dir'), 'x');
    const broken = new FsBlobStore({ dir: join(dir.path, 'not-a-dir', 'blocks') });
    // Same index (it knows the blocks), broken storage.
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store: broken, logger, hotCacheBytes: 0 });
    const hit = await tier.lookup(ns, tokens, scope);
    expect(hit.hitBlocks).toBe(3); // from the local index
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(0);
    expect(loaded.stoppedAt?.code).toMatch(/^KVT_ERR_STORAGE_/);
    // Keys the index lacks go to storage.has, which fails: a miss.
    const other = tokensOf(64 * 2, 31);
    expect((await tier.lookup(ns, other, scope)).hitBlocks).toBe(0);
    // Writes fail in the background.
    expect(tier.store({ namespace: ns, tokens: other, layout: LAYOUT, ...scope, payloads: [payloadFor(31, 0), payloadFor(31, 1)] }).queued).toBe(2);
    await tier.flush();
    const errors = tier.stats().errors;
    const storageErrors = Object.entries(errors).filter(([code]) => code.startsWith('KVT_ERR_STORAGE_'));
    expect(storageErrors.reduce((sum, [, n]) => sum + n, 0)).toBeGreaterThanOrEqual(4);
    expect(tier.stats().blocksWritten).toBe(0);
    expect(logger.warnings.length).toBeGreaterThan(0);
    await tier.close();
    await goodStore.close();
    await dir.remove();
  });
});

describe('KvTier policy changes and timers', () => {
  it('a shorter TTL applies to the next lookup at once; GC then rebases and deletes', async () => {
    const dir = await tempDir();
    const clock = new ManualClock();
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock, logger: captureLogger() });
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    const tokens = tokensOf(64 * 2, 60);
    tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: [payloadFor(60, 0), payloadFor(60, 1)] });
    await tier.flush();
    clock.advance(2 * DAY_MS);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(2); // memo now holds both as live for 7 d
    await tier.flush();
    await tier.policy.update((doc) => {
      doc.classes.chat.ttlMs = DAY_MS;
    });
    clock.advance(DAY_MS);
    expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(0);
    const report = await tier.gc();
    expect(report.rebasedEntries).toBe(2);
    expect(report.removed.expired.blocks).toBe(2);
    await tier.close();
    await store.close();
    await dir.remove();
  });

  it('runs GC on a timer when gcIntervalMs is set', async () => {
    const dir = await tempDir();
    const clock = new ManualClock();
    const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock, logger: captureLogger(), gcIntervalMs: 20 });
    const scope = { tenant: 'acme', trafficClass: 'agent' };
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    tier.store({ namespace: ns, tokens: tokensOf(64, 61), layout: LAYOUT, ...scope, payloads: [payloadFor(61, 0)] });
    await tier.flush();
    clock.advance(3 * DAY_MS);
    const deadline = Date.now() + 10_000;
    while (tier.stats().gc.expired.blocks === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 20));
    expect(tier.stats().gc.expired.blocks).toBe(1);
    await tier.close();
    await store.close();
    await dir.remove();
  });
});
