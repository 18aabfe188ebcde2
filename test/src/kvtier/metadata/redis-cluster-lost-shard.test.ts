/**
 * A 4-shard plane on a real Redis Cluster loses one primary's data together with its replica's
 * (FLUSHALL on the primary, replicated): only the shards that lived there turn untrusted, and GC of
 * those shards deletes nothing while they are, while the other shards keep being collected (their
 * long-expired records go). The rebuild lists only the lost shards' key ranges from storage (prefix
 * listings; no key of another shard is read) and writes records for those keys only.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { ForwardingStore } from '../../../helpers/forwarding-store.ts';
import { BlockIndex, DAY_MS, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord } from '../../../../src/kvtier/index.ts';
import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { keySlot, startRedisCluster } from '../../../helpers/redis-cluster.ts';
import { keyOf } from './plane-conformance.ts';
import { suiteFixture } from '../../../helpers/suite-fixture.ts';

const T0 = Date.UTC(2026, 0, 1);
const cluster = suiteFixture(() => startRedisCluster(), (c) => c.stop(), 60_000);

describe('a lost shard on a Redis Cluster', () => {
  it('only the flushed primary’s shards rebuild, from a listing of their own key ranges; nothing of them is deleted before they are trusted again, and the other shards keep being collected', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-lost-shard-'));
    const keyPrefix = 'lost:plane:';
    const plane = await RedisMetadataPlane.open({ url: cluster().address, keyPrefix, shards: 4 });
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
        const primary = cluster().primaryOfSlot(keySlot(`${keyPrefix}{${shard}}:gen`));
        shardsOn.set(primary, [...(shardsOn.get(primary) ?? []), shard]);
      }
      const [victim, lost] = [...shardsOn].sort((a, b) => a[1].length - b[1].length)[0];
      expect(lost.length).toBeLessThan(4);
      cluster().cli(victim, 'FLUSHALL');
      const shardOf = (key: string) => parseInt(key.slice(0, 2), 16) >> 6;
      const lostKeys = records.map((r) => r.key).filter((key) => lost.includes(shardOf(key)));
      const keptKeys = records.map((r) => r.key).filter((key) => !lost.includes(shardOf(key)));
      expect(lostKeys.length).toBeGreaterThan(0);

      expect((await plane.state()).trusted).toBe(false);
      expect((await plane.untrustedShards()).sort()).toEqual([...lost].sort());

      // Every record left is long expired. GC of the lost shards whose rebuild is cut short deletes nothing.
      clock.set(T0 + 10 * DAY_MS);
      const controller = new AbortController();
      const cut = await runGc({ plane, index, store, policy, clock }, { shards: lost, sweepOrphans: false, batchSize: 16, signal: controller.signal, onProgress: () => controller.abort() });
      expect(cut.plane.trusted).toBe(false);
      expect(cut.shards.skipped).toEqual(lost.slice(0, 1));
      expect(cut.removed.expired.blocks + cut.removed.evicted.blocks).toBe(0);
      expect(await store.has(records.map((r) => r.key))).toEqual(records.map(() => true));

      // The other shards do not wait for them: a whole-plane run whose lost shards cannot be rebuilt
      // (their listing fails) still collects every other shard.
      const failingList = new (class extends ForwardingStore {
        override list(prefix?: string): AsyncIterable<string> {
          if (prefix !== undefined && prefix !== '' && lost.includes(parseInt(prefix[0], 16) >> 2)) throw new Error('listing unavailable');
          return super.list(prefix);
        }
      })(store);
      const others = await runGc({ plane, index, store: failingList, policy, clock }, { sweepOrphans: false });
      expect(others.plane.trusted).toBe(false);
      expect(others.shards.skipped.sort()).toEqual([...lost].sort());
      expect(others.shards.collected.sort()).toEqual([0, 1, 2, 3].filter((shard) => !lost.includes(shard)));
      expect(others.removed.expired.blocks).toBe(keptKeys.length);
      expect(await store.has(keptKeys)).toEqual(keptKeys.map(() => false));
      expect(await store.has(lostKeys)).toEqual(lostKeys.map(() => true));

      // The full run: the lost shards' key ranges listed by prefix (nothing else read), their records written, then judged as usual.
      const listed: string[] = [];
      const counting = new (class extends ForwardingStore {
        override async *list(prefix?: string): AsyncIterable<string> {
          for await (const key of super.list(prefix)) {
            listed.push(key);
            yield key;
          }
        }
      })(store);
      const report = await runGc({ plane, index, store: counting, policy, clock }, { sweepOrphans: false });
      expect(report.errors).toEqual([]);
      expect(report.plane.trusted).toBe(true);
      expect(listed.sort()).toEqual([...lostKeys].sort());
      // The cut run wrote its first batch already (ifAbsent: the full run writes only what is still missing).
      expect(cut.rebuiltRecords + others.rebuiltRecords + report.rebuiltRecords).toBe(lostKeys.length);
      expect(report.removed.expired.blocks).toBe(0);
      expect(await store.has(lostKeys)).toEqual(lostKeys.map(() => true));
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
