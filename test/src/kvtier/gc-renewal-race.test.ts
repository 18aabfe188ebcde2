import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, ManualClock, RedisMetadataPlane, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane } from '../../../src/kvtier/index.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';

const T0 = Date.UTC(2026, 0, 1);
let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.stop();
});

function keyOf(i: number): string {
  return (0xabc000 + i).toString(16).padStart(32, '0');
}

/**
 * GC judges a page, then removes. A hit on another node that lands in between
 * (its renewal flushed to the plane) must keep the block: record and blob.
 * The hook runs the other node's renewal right before GC's plane removal.
 */
describe('GC and a renewal racing its removal (real redis-server)', () => {
  it('a block renewed on another node between judge and remove keeps its record and blob; the others go', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-gc-race-'));
    const keyPrefix = `race${run++}:plane:`;
    const gcPlane = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    const otherNode = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const index = BlockIndex.open({ path: join(dir, 'index') });
    try {
      const clock = new ManualClock(T0);
      // acme's agent TTL (2 d) is shorter than the class's (3 d): GC must judge acme's rows page by page (scan, judge, remove).
      const policy = new RetentionPolicy({ ...defaultPolicyDoc(), tenants: { acme: { ttlMs: { agent: 2 * DAY_MS } } } });
      await gcPlane.markTrusted((await gcPlane.state()).generation);
      const records: BlockRecord[] = [];
      for (let i = 0; i < 6; i++) {
        records.push({ key: keyOf(i), trafficClass: 'agent', tenant: 'acme', sizeBytes: 10, writer: 'node-a', createdAt: T0, lastUseAt: T0 + i, ttlMs: 0, depth: 0 });
        await store.put(keyOf(i), new Uint8Array([i]));
      }
      await gcPlane.upsert(records);
      clock.set(T0 + 2 * DAY_MS + 100); // every block is past acme's agent TTL

      const renewed = keyOf(2);
      let judgedBatches = 0;
      const hooked = Object.create(gcPlane) as MetadataPlane;
      hooked.remove = async (keys, options) => {
        if (judgedBatches++ === 0) {
          // GC already judged this page (the key is in it); node B's hit lands now.
          expect(keys).toContain(renewed);
          otherNode.renew([renewed], clock.now());
          await otherNode.flush();
        }
        return gcPlane.remove(keys, options);
      };
      const report = await runGc({ plane: hooked, index, store, policy, clock }, { sweepOrphans: false });
      expect(report.errors).toEqual([]);
      expect(judgedBatches).toBe(1);
      expect(report.removed.expired.blocks).toBe(5);

      const [kept] = await gcPlane.get([renewed]);
      expect(kept?.lastUseAt).toBe(clock.now());
      expect(await store.has([renewed])).toEqual([true]);
      const gone = records.map((record) => record.key).filter((key) => key !== renewed);
      expect(await gcPlane.get(gone)).toEqual(gone.map(() => null));
      expect(await store.has(gone)).toEqual(gone.map(() => false));
      expect((await gcPlane.usage()).blocks.g).toBe(1);

      // The renewal counts from its own time: the next GC keeps it until its TTL from then has passed.
      expect((await runGc({ plane: gcPlane, index, store, policy, clock }, { sweepOrphans: false })).removed.expired.blocks).toBe(0);
      clock.advance(2 * DAY_MS + 1);
      expect((await runGc({ plane: gcPlane, index, store, policy, clock }, { sweepOrphans: false })).removed.expired.blocks).toBe(1);
      expect(await store.has([renewed])).toEqual([false]);
    } finally {
      await otherNode.close();
      await gcPlane.close();
      await index.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });

  it('the batch removal below the longest TTL is atomic: a renewal that landed before it keeps the block', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-gc-race-'));
    const keyPrefix = `race${run++}:plane:`;
    const gcPlane = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    const otherNode = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const index = BlockIndex.open({ path: join(dir, 'index') });
    try {
      const clock = new ManualClock(T0);
      const policy = new RetentionPolicy(defaultPolicyDoc());
      await gcPlane.markTrusted((await gcPlane.state()).generation);
      const records: BlockRecord[] = [];
      for (let i = 0; i < 4; i++) {
        records.push({ key: keyOf(i), trafficClass: 'agent', tenant: 't', sizeBytes: 10, writer: 'node-a', createdAt: T0, lastUseAt: T0 + i, ttlMs: 0, depth: 0 });
        await store.put(keyOf(i), new Uint8Array([i]));
      }
      await gcPlane.upsert(records);
      clock.set(T0 + 3 * DAY_MS + 100);
      const renewed = keyOf(1);
      const hooked = Object.create(gcPlane) as MetadataPlane;
      let calls = 0;
      hooked.removeByLastUse = async (options) => {
        if (calls++ === 0) {
          otherNode.renew([renewed], clock.now());
          await otherNode.flush();
        }
        return gcPlane.removeByLastUse(options);
      };
      const report = await runGc({ plane: hooked, index, store, policy, clock }, { sweepOrphans: false });
      expect(report.errors).toEqual([]);
      expect(report.removed.expired.blocks).toBe(3);
      expect((await gcPlane.get([renewed]))[0]?.lastUseAt).toBe(clock.now());
      expect(await store.has([renewed])).toEqual([true]);
    } finally {
      await otherNode.close();
      await gcPlane.close();
      await index.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
