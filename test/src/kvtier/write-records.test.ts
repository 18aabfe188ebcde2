/**
 * Group commit of the write path's records (write-records.ts): writes that
 * land while a batch is being recorded go into the next batch, one index
 * transaction for all of them, not one per event-loop turn.
 */
import { join } from 'node:path';

import { afterEach, expect, it, vi } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockIndex, KvTier, ManualClock } from '../../../src/kvtier/index.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

afterEach(() => {
  vi.restoreAllMocks();
});

async function until(check: () => boolean): Promise<void> {
  for (let i = 0; i < 10_000 && !check(); i++) await new Promise<void>((resolve) => setImmediate(resolve));
  expect(check()).toBe(true);
}

it('writes landing in separate turns while a batch is recorded are recorded together next, then each is in the index', async () => {
  const dir = await tempDir();
  const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, clock: new ManualClock(), logger: captureLogger(), hotCacheBytes: 0, writeConcurrency: 16 });
  let release!: () => void;
  const gate = new Promise<void>((resolve) => (release = resolve));
  const batches: number[] = [];
  const recordWrites = BlockIndex.prototype.recordWrites;
  vi.spyOn(BlockIndex.prototype, 'recordWrites').mockImplementation(async function (this: BlockIndex, ...args) {
    batches.push(args[0].length);
    if (batches.length === 1) await gate;
    return recordWrites.apply(this, args);
  });
  try {
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    const prompts = [0, 1, 2, 3].map((i) => tokensOf(64, 80 + i));
    tier.store({ namespace: ns, tokens: prompts[0], layout: LAYOUT, ...scope, payloads: [payloadFor(80, 0)] });
    await until(() => batches.length === 1);
    // Three more writes, each stored and landed in a turn of its own while the first batch is held.
    for (let i = 1; i < 4; i++) {
      tier.store({ namespace: ns, tokens: prompts[i], layout: LAYOUT, ...scope, payloads: [payloadFor(80 + i, 0)] });
      await until(() => tier.stats().blocksWritten === i + 1);
      await new Promise<void>((resolve) => setImmediate(resolve));
    }
    expect(batches).toEqual([1]);
    release();
    await tier.flush();
    expect(batches).toEqual([1, 3]);
    for (const tokens of prompts) expect((await tier.lookup(ns, tokens, scope)).hitBlocks).toBe(1);
    expect(tier.stats().errors).toEqual({});
  } finally {
    release();
    await tier.close();
    await store.close();
    await dir.remove();
  }
});
