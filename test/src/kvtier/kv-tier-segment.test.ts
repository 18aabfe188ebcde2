import { promises as fsp } from 'node:fs';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { SegmentBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier, ManualClock } from '../../../src/kvtier/index.ts';
import { LAYOUT, payloadFor, tempDir, tokensOf } from './fixtures.ts';
import { runKvTierSuite } from './kv-tier-suite.ts';

runKvTierSuite('a segment store', async () => {
  const dir = await tempDir('kvtier-segment-store-');
  return {
    open: () => SegmentBlobStore.open({ dir: join(dir.path, 'segments') }),
    dispose: () => dir.remove(),
  };
});

describe('KvTier GC over a segment store', () => {
  it('expired blocks are deleted and their segments compacted: the space comes back, live blocks still load', async () => {
    const dir = await tempDir('kvtier-segment-gc-');
    const segments = join(dir.path, 'segments');
    const store = await SegmentBlobStore.open({ dir: segments, segmentBytes: 64 * 1024 });
    const clock = new ManualClock(Date.UTC(2026, 0, 1));
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock, touchIntervalMs: 0 });
    await tier.policy.update((doc) => {
      doc.classes.chat.ttlMs = 60_000;
      return doc;
    });
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const old = tokensOf(64 * 40, 7);
    tier.store({ namespace: ns, tokens: old, layout: LAYOUT, ...scope, payloads: Array.from({ length: 40 }, (_, b) => payloadFor(7, b)) });
    await tier.flush();
    clock.advance(50_000);
    const fresh = tokensOf(64 * 4, 8);
    tier.store({ namespace: ns, tokens: fresh, layout: LAYOUT, ...scope, payloads: Array.from({ length: 4 }, (_, b) => payloadFor(8, b)) });
    await tier.flush();
    const bytesOnDisk = async () => {
      let total = 0;
      for (const name of await fsp.readdir(segments)) total += (await fsp.stat(join(segments, name))).size;
      return total;
    };
    const before = await bytesOnDisk();
    clock.advance(20_000); // the first 40 blocks expire; the last 4 do not
    const report = await tier.gc();
    expect(report.removed.expired.blocks).toBe(40);
    expect(report.segmentsCompacted).toBeGreaterThan(0);
    expect(report.segmentBytesReclaimed).toBeGreaterThan(0);
    expect(await bytesOnDisk()).toBeLessThan(before / 2);
    const hit = await tier.lookup(ns, fresh, scope);
    expect(hit.hitBlocks).toBe(4);
    const loaded = await tier.load(hit);
    expect(loaded.blocks).toHaveLength(4);
    loaded.release();
    expect((await tier.lookup(ns, old, scope)).hitBlocks).toBe(0);
    await tier.close();
    await store.close();
    await dir.remove();
  });
});
