/**
 * A 4-shard plane on a real Redis Cluster loses one primary's data together with its replica's
 * (FLUSHALL on the primary, replicated): only the shards that lived there turn untrusted, GC deletes
 * nothing while they are (even records of the other shards that are long expired), and the rebuild
 * writes records for those shards' keys only — the other shards' records are not rewritten (they
 * keep their old last use and expire in the same run, while the rebuilt ones count from now).
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { BlockIndex, DAY_MS, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord } from '../../../../src/kvtier/index.ts';
import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../../helpers/redis-cluster.ts';
import { keyOf } from './plane-conformance.ts';

const T0 = Date.UTC(2026, 0, 1);
let cluster: RedisClusterFixture;

beforeAll(async () => {
  cluster = await startRedisCluster();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

describe('a lost shard on a Redis Cluster', () => {
  it('only the flushed primary’s shards rebuild from storage, and nothing is deleted before they are trusted again', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-lost-shard-'));
    const keyPrefix = 'lost:plane:';
    const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix, shards: 4 });
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const index = BlockIndex.open({ path: join(dir, 'index') });
    const clock = new ManualClock(T0);
    const policy = new RetentionPolicy(defaultPolicyDoc());
    try {
      const records: BlockRecord[] = Array.from({ length: 200 }, (_, n) => ({ key: keyOf(n), trafficClass: 'agent', tenant: 'acme', sizeBytes: 1, writer: 'node-a', createdAt: T0, lastUseAt: T0, ttlMs: 0, depth: 0 }));
      for (const record of records) await store.put(record.key, new Uint8Array([7]));
      await plane.upsert(records);
      await plane.markTrusted((await plane.state()).generation);

      // The primary holding the fewest of the 4 shard tags loses its data (and its replica with it).
      const shardsOn = new Map<number, number[]>();
      for (let shard = 0; shard < 4; shard++) {
        const primary = cluster.primaryOfSlot(keySlot(`${keyPrefix}{${shard}}:gen`));
        shardsOn.set(primary, [...(shardsOn.get(primary) ?? []), shard]);
      }
      const [victim, lost] = [...shardsOn].sort((a, b) => a[1].length - b[1].length)[0];
      expect(lost.length).toBeLessThan(4);
      cluster.cli(victim, 'FLUSHALL');
      const shardOf = (key: string) => parseInt(key.slice(0, 2), 16) >> 6;
      const lostKeys = records.map((r) => r.key).filter((key) => lost.includes(shardOf(key)));
      const keptKeys = records.map((r) => r.key).filter((key) => !lost.includes(shardOf(key)));
      expect(lostKeys.length).toBeGreaterThan(0);

      expect((await plane.state()).trusted).toBe(false);
      expect((await plane.untrustedShards()).sort()).toEqual([...lost].sort());

      // Every record left is long expired; a GC whose rebuild is cut short deletes nothing.
      clock.set(T0 + 10 * DAY_MS);
      const controller = new AbortController();
      const cut = await runGc({ plane, index, store, policy, clock }, { sweepOrphans: false, batchSize: 16, signal: controller.signal, onProgress: () => controller.abort() });
      expect(cut.plane.trusted).toBe(false);
      expect(cut.removed.expired.blocks + cut.removed.evicted.blocks).toBe(0);
      expect(await store.has(records.map((r) => r.key))).toEqual(records.map(() => true));

      // The full run: records for the lost shards' keys only, then judging as usual.
      const report = await runGc({ plane, index, store, policy, clock }, { sweepOrphans: false });
      expect(report.errors).toEqual([]);
      expect(report.plane.trusted).toBe(true);
      // The cut run wrote its first batch already (ifAbsent: the full run writes only what is still missing).
      expect((cut.rebuiltRecords ?? 0) + (report.rebuiltRecords ?? 0)).toBe(lostKeys.length);
      // The kept shards' records were not rewritten: they still carried T0 and expired now.
      expect(report.removed.expired.blocks).toBe(keptKeys.length);
      expect(await store.has(lostKeys)).toEqual(lostKeys.map(() => true));
      expect(await store.has(keptKeys)).toEqual(keptKeys.map(() => false));
      expect((await plane.get(lostKeys)).every((record) => record?.lastUseAt === clock.now())).toBe(true);
      expect((await plane.state()).trusted).toBe(true);
    } finally {
      await plane.close();
      await index.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  });
});
