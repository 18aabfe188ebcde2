import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane, type RedisMetadataPlane } from '../../../src/kvtier/index.ts';
import { openPlaneNodes } from '../../helpers/redis-plane-nodes.ts';
import { startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';

const T0 = Date.UTC(2026, 0, 1);
let server: RedisServer;
let cluster: RedisClusterFixture;

beforeAll(async () => {
  [server, cluster] = await Promise.all([startRedis(), startRedisCluster()]);
}, 60_000);

afterAll(async () => {
  await Promise.all([server?.stop(), cluster?.stop()]);
});

function keyOf(i: number): string {
  return (0xabc000 + i).toString(16).padStart(32, '0');
}

interface RaceRig {
  gcPlane: RedisMetadataPlane;
  otherNode: RedisMetadataPlane;
  store: FsBlobStore;
  index: BlockIndex;
  clock: ManualClock;
}

/** GC's node and another node on one fresh, trusted plane, an fs store and GC's index; `records` written to plane and store (blob i = [i]). */
async function withRaceRig(url: string, records: BlockRecord[], body: (rig: RaceRig) => Promise<void>): Promise<void> {
  const dir = await mkdtemp(join(tmpdir(), 'kvt-gc-race-'));
  const nodes = await openPlaneNodes(url, 2, 'race');
  const [gcPlane, otherNode] = nodes.planes;
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const index = BlockIndex.open({ path: join(dir, 'index') });
  try {
    await gcPlane.markTrusted((await gcPlane.state()).generation);
    for (let i = 0; i < records.length; i++) await store.put(records[i].key, new Uint8Array([i]));
    await gcPlane.upsert(records);
    await body({ gcPlane, otherNode, store, index, clock: new ManualClock(T0) });
  } finally {
    await nodes.close();
    await index.close();
    await store.close();
    await rm(dir, { recursive: true, force: true });
  }
}

/**
 * GC judges a page, then removes. A hit on another node that lands in between
 * (its renewal flushed to the plane) must keep the block: record and blob.
 * The hook runs the other node's renewal right before GC's plane removal.
 */
/**
 * Both removals re-check last use inside the Lua that removes the record (REMOVE_LUA compares the
 * row's score with the judged bound; REMOVE_OLDEST_LUA reads the rows it removes in the same call),
 * so the race is closed in Redis itself: the same holds on one redis-server and on a Redis Cluster.
 */
describe.each([
  ['one redis-server', () => server.url],
  ['a Redis Cluster (3 primaries + replicas)', () => cluster.address],
])('GC and a renewal racing its removal (%s)', (_name, urlOf) => {
  it('a block renewed on another node between judge and remove keeps its record and blob; the others go', async () => {
    const records: BlockRecord[] = [];
    for (let i = 0; i < 6; i++) records.push({ key: keyOf(i), trafficClass: 'agent', tenant: 'acme', sizeBytes: 10, writer: 'node-a', createdAt: T0, lastUseAt: T0 + i, ttlMs: 0, depth: 0 });
    await withRaceRig(urlOf(), records, async ({ gcPlane, otherNode, store, index, clock }) => {
      // acme's agent TTL (2 d) is shorter than the class's (3 d): GC must judge acme's rows page by page (scan, judge, remove).
      const policy = new RetentionPolicy({ ...defaultPolicyDoc(), tenants: { acme: { ttlMs: { agent: 2 * DAY_MS } } } });
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
    });
  });

  it('the batch removal below the longest TTL is atomic: a renewal that landed before it keeps the block', async () => {
    const records: BlockRecord[] = [];
    for (let i = 0; i < 4; i++) records.push({ key: keyOf(i), trafficClass: 'agent', tenant: 't', sizeBytes: 10, writer: 'node-a', createdAt: T0, lastUseAt: T0 + i, ttlMs: 0, depth: 0 });
    await withRaceRig(urlOf(), records, async ({ gcPlane, otherNode, store, index, clock }) => {
      const policy = new RetentionPolicy(defaultPolicyDoc());
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
    });
  });
});
