/**
 * The Redis plane on a real Redis Cluster (3 primaries, 1 replica each, created with
 * `redis-cli --cluster create … --cluster-replicas 1`): the whole MetadataPlane conformance suite
 * through an ioredis Cluster client (`redis-cluster://…`), and no command of it raising CROSSSLOT or
 * a script's cross-slot error on any node (INFO errorstats, counted before and after).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../../helpers/redis-cluster.ts';
import { keyOf, planeFixture, recordOf, runPlaneConformance } from './plane-conformance.ts';

let cluster: RedisClusterFixture;
let run = 0;
let errorsBefore = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
  errorsBefore = cluster.crossSlotErrors();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

/** Prefixes whose `{0}` plane tag lands on different primaries across runs do not matter: the tag is the same, so every plane shares one slot. */
runPlaneConformance('redis cluster (1 shard)', async () => {
  const keyPrefix = `c${run++}:plane:`;
  return planeFixture(() => RedisMetadataPlane.open({ url: cluster.address, keyPrefix }));
});

// Four shards over the three primaries: every call split by shard, the walks merged across them.
runPlaneConformance('redis cluster (4 shards)', async () => {
  const keyPrefix = `c${run++}:plane:`;
  return planeFixture(() => RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 4 }));
});

describe('RedisMetadataPlane on a Redis Cluster', () => {
  it('4 shards: each block lives in the shard of its key\'s top 2 bits, under tag {s}, and the tags spread over the primaries', async () => {
    const keyPrefix = `c${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 4 });
    try {
      const records = Array.from({ length: 64 }, (_, n) => recordOf(n));
      await plane.upsert(records);
      const perShard = [0, 0, 0, 0];
      for (const record of records) perShard[parseInt(record.key.slice(0, 2), 16) >> 6]++;
      const primaries = new Set<number>();
      for (let shard = 0; shard < 4; shard++) {
        const primary = cluster.primaryOfSlot(keySlot(`${keyPrefix}{${shard}}:usage`));
        primaries.add(primary);
        expect(Number(cluster.cli(primary, 'HGET', `${keyPrefix}{${shard}}:usage`, 'n|g').trim() || 0), `shard ${shard}`).toBe(perShard[shard]);
      }
      expect(primaries.size).toBeGreaterThan(1);
      expect((await plane.usage()).blocks.g).toBe(64);
      expect((await plane.get(records.map((record) => record.key))).map((record) => record?.key)).toEqual(records.map((record) => record.key));
    } finally {
      await plane.close();
    }
  });

  it('the shard count is fixed per deployment: a node opening with another S fails with KVT_ERR_PLANE_SHARDS', async () => {
    const keyPrefix = `c${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 4 });
    try {
      await expect(RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 2 })).rejects.toMatchObject({ code: 'KVT_ERR_PLANE_SHARDS', message: expect.stringContaining('created with 4 shards') });
      await expect(RedisMetadataPlane.open({ url: cluster.address, keyPrefix })).rejects.toMatchObject({ code: 'KVT_ERR_PLANE_SHARDS' });
      await expect(RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 3 })).rejects.toMatchObject({ code: 'KVT_ERR_PLANE_OPEN' });
    } finally {
      await plane.close();
    }
  });

  it('a removal on one node reaches the listeners of another (PUBLISH crosses the cluster bus)', async () => {
    const keyPrefix = `c${run++}:plane:`;
    const a = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix });
    const b = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix });
    try {
      await a.upsert([recordOf(1), recordOf(2)]);
      const told = new Promise<string[]>((resolve) => b.onRemoved(resolve));
      await a.remove([keyOf(2)]);
      expect(await told).toEqual([keyOf(2)]);
    } finally {
      await a.close();
      await b.close();
    }
  });

  it('the plane lives on the primary that serves its tag', async () => {
    const keyPrefix = `c${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix });
    try {
      await plane.upsert([recordOf(1)]);
      const primary = cluster.primaryOfSlot(keySlot(`${keyPrefix}{0}:usage`));
      expect(cluster.cli(primary, 'HGET', `${keyPrefix}{0}:usage`, 'n|g').trim()).toBe('1');
    } finally {
      await plane.close();
    }
  });

  it('no command of the suites above raised CROSSSLOT or a script cross-slot error on any node', () => {
    expect(cluster.crossSlotErrors() - errorsBefore).toBe(0);
  });

  it('the watch itself sees a cross-slot command (so the check above can fail)', () => {
    const before = cluster.crossSlotErrors();
    try {
      cluster.cli(cluster.ports[0], 'MSET', '{a}x', '1', '{b}x', '1');
    } catch {
      // redis-cli's exit status on an error reply differs between versions; the count is what is checked.
    }
    expect(cluster.crossSlotErrors()).toBe(before + 1);
  });
});
