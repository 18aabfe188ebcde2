/**
 * Durability of the plane on a Redis Cluster without replicas: a primary killed with kill -9 and
 * started again comes back trusted with its records when it runs with AOF (appendonly yes,
 * appendfsync always here), and untrusted (its shard lost, a rebuild needed) without AOF — the
 * contrast shows the check can fail.
 */
import { afterEach, describe, expect, it } from 'vitest';

import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../../helpers/redis-cluster.ts';
import { recordOf } from './plane-conformance.ts';

let cluster: RedisClusterFixture | undefined;

afterEach(async () => {
  await cluster?.stop();
  cluster = undefined;
});

async function killAndRestartShard0Primary(aof: boolean): Promise<{ trusted: boolean; records: number; untrusted: number[] }> {
  cluster = await startRedisCluster({ replicas: 0, aof });
  const keyPrefix = 'aof:plane:';
  const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 4 });
  try {
    const records = Array.from({ length: 100 }, (_, n) => recordOf(n));
    await plane.upsert(records);
    await plane.markTrusted((await plane.state()).generation);
    const victim = cluster.primaryOfSlot(keySlot(`${keyPrefix}{0}:gen`));
    await cluster.kill(victim);
    await cluster.restart(victim);
    await cluster.waitHealthy();
    const state = await plane.state();
    const found = (await plane.get(records.map((r) => r.key))).filter((r) => r !== null).length;
    return { trusted: state.trusted, records: found, untrusted: await plane.untrustedShards() };
  } finally {
    await plane.close();
  }
}

describe('a plane primary restarted (no replica)', () => {
  it('with AOF it comes back trusted with every record: no rebuild', async () => {
    const after = await killAndRestartShard0Primary(true);
    expect(after).toEqual({ trusted: true, records: 100, untrusted: [] });
  }, 90_000);

  it('without AOF its shards come back empty and untrusted (GC rebuilds them before judging)', async () => {
    const after = await killAndRestartShard0Primary(false);
    expect(after.trusted).toBe(false);
    expect(after.untrusted).toContain(0);
    expect(after.records).toBeLessThan(100);
  }, 90_000);
});
