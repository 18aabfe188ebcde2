/**
 * A stored block replaced by a file that claims terabytes (sparse: no disk):
 * the load ends at that block with KVT_ERR_STORAGE_TOO_LARGE, the blocks
 * before it are returned, no buffer is sized to the claim, and the tier goes
 * on serving. Before the read bound, sizing a recycled buffer to the file
 * threw inside the fs store's callback and ended the process.
 */
import { truncateSync } from 'node:fs';
import { join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { MAX_BLOCK_READ_BYTES, ReadBufferPool } from '../../../src/kvtier/read-buffer-pool.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';

const cleanups: (() => Promise<void>)[] = [];
afterEach(async () => {
  for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
});

/** A tier (its index under `node`) over a fresh fs store holding one prompt of 4 blocks (seed `seed`); all closed after the test. */
async function tierWithPrefix(dirPrefix: string, seed: number, node = 'node') {
  const dir = await tempDir(dirPrefix);
  cleanups.push(dir.remove);
  const store = await FsBlobStore.open({ dir: join(dir.path, 'blocks') });
  cleanups.push(() => store.close());
  const tier = await KvTier.open({ dataDir: join(dir.path, node), store, logger: captureLogger(), touchIntervalMs: 0, hotCacheBytes: 0 });
  cleanups.push(() => tier.close());
  const scope = { tenant: 'acme', trafficClass: 'chat' };
  const namespace = tier.namespace({ modelFingerprint: 'oversized', tenantSalt: 'acme' });
  const tokens = tokensOf(64 * 4, seed);
  tier.store({ namespace, tokens, layout: LAYOUT, ...scope, payloads: Array.from({ length: 4 }, (_, b) => payloadFor(seed, b)) });
  await tier.flush();
  return { dir, store, tier, scope, namespace, tokens };
}

it('a block file of 8 TiB (sparse) ends the load at that block with KVT_ERR_STORAGE_TOO_LARGE; the prefix before it loads', async () => {
  const { store, tier, scope, namespace, tokens } = await tierWithPrefix('kvtier-oversized-', 11);
  const hit = await tier.lookup(namespace, tokens, scope);
  expect(hit.hitBlocks).toBe(4);
  truncateSync(store.pathOf(hit.keys[2]), 8 * 2 ** 40);

  const loaded = await tier.load(hit);
  expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_STORAGE_TOO_LARGE' });
  expect(loaded.blocks.map((b) => b.index)).toEqual([0, 1]);
  loaded.release();
  // Still serving: another prefix stores and loads whole.
  const other = tokensOf(64 * 2, 12);
  tier.store({ namespace, tokens: other, layout: LAYOUT, ...scope, payloads: [payloadFor(12, 0), payloadFor(12, 1)] });
  await tier.flush();
  const again = await tier.load(await tier.lookup(namespace, other, scope));
  expect(again.stoppedAt).toBeUndefined();
  expect(again.blocks).toHaveLength(2);
  again.release();
});

it('the read pool refuses a take past its bound (or not a byte count) with KVT_ERR_BLOCK_TOO_LARGE, before allocating', () => {
  const pool = new ReadBufferPool(1 << 20, 4 << 20);
  expect(pool.take(4 << 20).byteLength).toBe(4 << 20);
  for (const size of [(4 << 20) + 1, 2 ** 43, -1, 1.5, Number.NaN]) {
    expect(() => pool.take(size), String(size)).toThrow(expect.objectContaining({ code: 'KVT_ERR_BLOCK_TOO_LARGE' }));
  }
  expect(pool.counts.taken).toBe(1);
  expect(new ReadBufferPool(0).maxTakeBytes).toBe(MAX_BLOCK_READ_BYTES);
});

it('a block refused as too large leaves the index and the plane at once: the next lookup stops before it, its blob is an orphan', async () => {
  const { store, tier, scope, namespace, tokens } = await tierWithPrefix('kvtier-oversized-forget-', 21);
  // A trusted plane, as in service: lookups then trust its records and do not probe storage for blocks it lacks.
  expect((await tier.gc()).plane.trusted).toBe(true);
  const hit = await tier.lookup(namespace, tokens, scope);
  expect(hit.hitBlocks).toBe(4);
  truncateSync(store.pathOf(hit.keys[2]), 8 * 2 ** 40);

  const loaded = await tier.load(hit);
  expect(loaded.stoppedAt).toEqual({ block: 2, code: 'KVT_ERR_STORAGE_TOO_LARGE' });
  loaded.release();
  await tier.flush();
  // Before: the index still held block 2, so every lookup hit it again and every load failed on it.
  const again = await tier.lookup(namespace, tokens, scope);
  expect(again.hitBlocks).toBe(2);
  const records = await tier.plane.get(hit.keys);
  expect(records.map((r) => r !== null)).toEqual([true, true, false, true]);
  // The blob is still there: GC's orphan sweep owns it now.
  expect(await store.has([hit.keys[2]])).toEqual([true]);
});

it('the plane rebuild reads blobs bounded: one of 8 TiB (sparse) gets no record (an orphan), the others are rebuilt and the plane is trusted', async () => {
  const { dir, store, tier: writer, scope, namespace, tokens } = await tierWithPrefix('kvtier-oversized-rebuild-', 31, 'writer');
  const keys = (await writer.lookup(namespace, tokens, scope)).keys;
  await writer.close();
  truncateSync(store.pathOf(keys[1]), 8 * 2 ** 40);

  // A new node over the same storage: its plane is new (untrusted), so its first GC rebuilds records from the listing.
  const node = await KvTier.open({ dataDir: join(dir.path, 'node'), store, logger: captureLogger(), touchIntervalMs: 0, hotCacheBytes: 0 });
  cleanups.push(() => node.close());
  const report = await node.gc();
  expect(report.errors).toEqual([]);
  expect(report.plane.trusted).toBe(true);
  expect(report.rebuiltRecords).toBe(3);
  const records = await node.plane.get(keys);
  expect(records.map((r) => r !== null)).toEqual([true, false, true, true]);
});
