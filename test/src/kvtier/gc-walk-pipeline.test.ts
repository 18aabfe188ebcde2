import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterEach, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, LmdbMetadataPlane, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane } from '../../../src/kvtier/index.ts';

const T0 = Date.UTC(2026, 0, 1);
const dirs: string[] = [];
afterEach(async () => {
  for (const dir of dirs.splice(0)) await rm(dir, { recursive: true, force: true });
});

function keyOf(i: number): string {
  return i.toString(16).padStart(32, '0');
}

/** The expire walk leaves a batch's storage delete running while it takes the next batch from the plane: a plane failure must be reported, stop the walk, and nothing of the run may outlive it. */
describe('GC expire walk with the plane removal in flight', () => {
  it('a plane removal failing mid-walk is reported, later batches wait for it, and the next run finishes the rest', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-gc-walk-'));
    dirs.push(dir);
    const plane = await LmdbMetadataPlane.open({ path: join(dir, 'plane') });
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const index = BlockIndex.open({ path: join(dir, 'index') });
    const clock = new ManualClock(T0);
    const policy = new RetentionPolicy(defaultPolicyDoc());
    await plane.markTrusted((await plane.state()).generation);
    const records: BlockRecord[] = [];
    for (let i = 0; i < 40; i++) {
      records.push({ key: keyOf(i + 1), trafficClass: 'agent', tenant: 't', sizeBytes: 10, writer: 'w', createdAt: T0 + i, lastUseAt: T0 + i, ttlMs: 0, depth: 0 });
      await store.put(keyOf(i + 1), new Uint8Array([i]));
    }
    await plane.upsert(records);
    clock.set(T0 + 4 * DAY_MS);

    let removals = 0;
    let settled = 0;
    const failing = Object.create(plane) as MetadataPlane;
    // Every record here is past the longest agent TTL: the walk takes batches with removeByLastUse.
    failing.removeByLastUse = async (options) => {
      removals++;
      if (removals === 2) throw Object.assign(new Error('plane down'), { code: 'KVT_ERR_PLANE_UNREACHABLE' });
      const taken = await plane.removeByLastUse(options);
      settled++;
      return taken;
    };
    const first = await runGc({ plane: failing, index, store, policy, clock }, { batchSize: 8, sweepOrphans: false });
    expect(first.errors.map((e) => e.code)).toContain('KVT_ERR_PLANE_UNREACHABLE');
    // Only the first batch landed; the failure stopped the walk before a third removal started.
    expect(removals).toBe(2);
    expect(settled).toBe(1);
    expect(first.removed.expired.blocks).toBe(8);
    // Plane first: the failed batch and the one judged while it was in flight keep their records and blobs (the next run finishes them).
    const left = (await plane.scanByLastUse({ limit: 100 })).records.map((r) => r.key);
    expect(left).toHaveLength(32);

    const second = await runGc({ plane, index, store, policy, clock }, { batchSize: 8, sweepOrphans: false });
    expect(second.errors).toEqual([]);
    expect(second.removed.expired.blocks).toBe(32);
    expect((await plane.usage()).blocks.g ?? 0).toBe(0);
    const stored: string[] = [];
    for await (const key of store.list()) stored.push(key);
    expect(stored).toEqual([]);
    await index.close();
    await store.close();
    await plane.close();
  });
});
