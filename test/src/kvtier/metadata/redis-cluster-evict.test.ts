/**
 * Eviction for a byte quota on a 4-shard plane on a real Redis Cluster (3 primaries + 3 replicas):
 * a quota is over the whole plane, so it is judged on the sum of the shards' usage, not on one
 * shard's. Each shard alone holds less than the quota here (a judgement on one shard's usage
 * evicts nothing), the plane as a whole holds twice the quota. After one GC run over every shard:
 * the whole plane's usage is within the quota and short of it by less than one record per shard,
 * every shard evicted, and the usage totals equal the sum over the shards and the records left. The
 * same when each shard is collected by a run of its own (cluster GC: one lease per shard), and for a
 * tenant's quota. Before the fix (each shard's share proportional to its part of the whole usage,
 * re-read after the shards before it had evicted): 24 500 B left of a 20 000 B quota, 12 200 of 10 000.
 */
import { mkdtemp } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { BlockIndex, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type MetadataPlane, type PlaneUsage } from '../../../../src/kvtier/index.ts';
import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { startRedisCluster, type RedisClusterFixture } from '../../../helpers/redis-cluster.ts';
import { keyOf } from './plane-conformance.ts';

const T0 = Date.UTC(2026, 0, 1);
const SHARDS = 4;
const RECORD_BYTES = 100;
let cluster: RedisClusterFixture;
let crossSlotBefore = 0;

beforeAll(async () => {
  cluster = await startRedisCluster();
  crossSlotBefore = cluster.crossSlotErrors();
}, 60_000);

afterAll(async () => {
  await cluster?.stop();
});

async function openRig(name: string, records: BlockRecord[]) {
  const dir = await mkdtemp(join(tmpdir(), `kvt-evict-${name}-`));
  const plane = await RedisMetadataPlane.open({ url: cluster.address, keyPrefix: `evict-${name}:plane:`, shards: SHARDS });
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const index = BlockIndex.open({ path: join(dir, 'index') });
  for (const record of records) await store.put(record.key, new Uint8Array([7]));
  await plane.upsert(records);
  await plane.markTrusted((await plane.state()).generation);
  return { plane, store, index, close: async () => { await index.close(); await plane.close(); } };
}

const shardUsages = (plane: MetadataPlane): Promise<PlaneUsage[]> => Promise.all(Array.from({ length: SHARDS }, (_, s) => plane.shard!(s).usage()));
const sum = (usages: PlaneUsage[], side: 'bytes' | 'blocks', tag: string) => usages.reduce((total, usage) => total + (usage[side][tag] ?? 0), 0);

async function recordsLeft(plane: MetadataPlane): Promise<BlockRecord[]> {
  const records: BlockRecord[] = [];
  let cursor: string | undefined;
  do {
    const page = await plane.scanByLastUse({ cursor, limit: 256 });
    records.push(...page.records);
    cursor = page.cursor;
  } while (cursor !== undefined);
  return records;
}

/** Usage totals = the sum over the shards = the records left, for each scope tag given. */
async function expectExactUsage(plane: MetadataPlane, tags: Record<string, (record: BlockRecord) => boolean>): Promise<void> {
  const whole = await plane.usage();
  const perShard = await shardUsages(plane);
  const left = await recordsLeft(plane);
  for (const [tag, inScope] of Object.entries(tags)) {
    const records = left.filter(inScope);
    expect(whole.blocks[tag] ?? 0, `blocks ${tag}`).toBe(sum(perShard, 'blocks', tag));
    expect(whole.bytes[tag] ?? 0, `bytes ${tag}`).toBe(sum(perShard, 'bytes', tag));
    expect(whole.blocks[tag] ?? 0, `blocks ${tag}`).toBe(records.length);
    expect(whole.bytes[tag] ?? 0, `bytes ${tag}`).toBe(records.reduce((total, record) => total + record.sizeBytes, 0));
  }
}

describe('eviction on a sharded plane on a Redis Cluster judges the whole plane’s usage', () => {
  it('a global quota: one run brings the sum over the 4 shards within the quota, every shard evicting its part', async () => {
    const records = Array.from({ length: 400 }, (_, n): BlockRecord => ({ key: keyOf(n), trafficClass: 'agent', tenant: 'acme', sizeBytes: RECORD_BYTES, writer: 'node-a', createdAt: T0, lastUseAt: T0 + n, ttlMs: 0, depth: 0 }));
    const rig = await openRig('global', records);
    try {
      const all = { g: () => true, 'c:agent': (r: BlockRecord) => r.trafficClass === 'agent', 't:acme': (r: BlockRecord) => r.tenant === 'acme' };
      await expectExactUsage(rig.plane, all);
      const before = await shardUsages(rig.plane);
      const quota = (records.length * RECORD_BYTES) / 2;
      // No shard alone is over the quota: only the sum is.
      for (const usage of before) expect(usage.bytes.g).toBeLessThan(quota);

      const policy = new RetentionPolicy({ ...defaultPolicyDoc(), quotaBytes: quota });
      const clock = new ManualClock(T0 + 60_000);
      const report = await runGc({ plane: rig.plane, index: rig.index, store: rig.store, policy, clock }, { sweepOrphans: false, batchSize: 16 });
      expect(report.errors).toEqual([]);
      expect(report.removed.expired.blocks).toBe(0);

      const whole = await rig.plane.usage();
      expect(whole.bytes.g).toBeLessThanOrEqual(quota);
      // Not more than the excess: each shard stops within one record of its part.
      expect(whole.bytes.g).toBeGreaterThan(quota - SHARDS * RECORD_BYTES);
      expect(report.removed.evicted.bytes).toBe(records.length * RECORD_BYTES - whole.bytes.g);
      const after = await shardUsages(rig.plane);
      after.forEach((usage, s) => expect(usage.bytes.g, `shard ${s}`).toBeLessThan(before[s].bytes.g));
      await expectExactUsage(rig.plane, all);
      // What was evicted is gone from storage too; what is left is there.
      const left = new Set((await recordsLeft(rig.plane)).map((r) => r.key));
      const onStorage = await rig.store.has(records.map((r) => r.key));
      records.forEach((record, n) => expect(onStorage[n], record.key).toBe(left.has(record.key)));
    } finally {
      await rig.close();
    }
  }, 120_000);

  it('each shard in its own run (as runners under per-shard leases collect them), one after another: the sum ends within the quota too', async () => {
    const records = Array.from({ length: 400 }, (_, n): BlockRecord => ({ key: keyOf(20_000 + n), trafficClass: 'agent', tenant: 'acme', sizeBytes: RECORD_BYTES, writer: 'node-a', createdAt: T0, lastUseAt: T0 + n, ttlMs: 0, depth: 0 }));
    const rig = await openRig('per-shard', records);
    try {
      const quota = (records.length * RECORD_BYTES) / 2;
      const policy = new RetentionPolicy({ ...defaultPolicyDoc(), quotaBytes: quota });
      for (const shard of [3, 1, 0, 2]) {
        const report = await runGc({ plane: rig.plane, index: rig.index, store: rig.store, policy, clock: new ManualClock(T0 + 60_000) }, { shards: [shard], sweepOrphans: false, batchSize: 16 });
        expect(report.errors).toEqual([]);
        expect(report.removed.evicted.blocks, `shard ${shard}`).toBeGreaterThan(0);
      }
      const whole = await rig.plane.usage();
      expect(whole.bytes.g).toBeLessThanOrEqual(quota);
      expect(whole.bytes.g).toBeGreaterThan(quota - SHARDS * RECORD_BYTES);
      await expectExactUsage(rig.plane, { g: () => true });
    } finally {
      await rig.close();
    }
  }, 120_000);

  it('a tenant quota: only that tenant’s sum over the shards is brought within it; another tenant keeps every block', async () => {
    const records = Array.from({ length: 400 }, (_, n): BlockRecord => ({ key: keyOf(10_000 + n), trafficClass: 'chat', tenant: n % 2 === 0 ? 'big' : 'small', sizeBytes: RECORD_BYTES, writer: 'node-a', createdAt: T0, lastUseAt: T0 + n, ttlMs: 0, depth: 0 }));
    const rig = await openRig('tenant', records);
    try {
      const big = records.filter((r) => r.tenant === 'big');
      const quota = (big.length * RECORD_BYTES) / 2;
      for (const usage of await shardUsages(rig.plane)) expect(usage.bytes['t:big']).toBeLessThan(quota);
      const doc = defaultPolicyDoc();
      const policy = new RetentionPolicy({ ...doc, tenants: { ...doc.tenants, big: { quotaBytes: quota } } });
      const report = await runGc({ plane: rig.plane, index: rig.index, store: rig.store, policy, clock: new ManualClock(T0 + 60_000) }, { sweepOrphans: false, batchSize: 16 });
      expect(report.errors).toEqual([]);

      const whole = await rig.plane.usage();
      expect(whole.bytes['t:big']).toBeLessThanOrEqual(quota);
      expect(whole.bytes['t:big']).toBeGreaterThan(quota - SHARDS * RECORD_BYTES);
      expect(whole.blocks['t:small']).toBe(records.length - big.length);
      await expectExactUsage(rig.plane, { g: () => true, 't:big': (r) => r.tenant === 'big', 't:small': (r) => r.tenant === 'small', 'c:chat': () => true });
    } finally {
      await rig.close();
    }
  }, 120_000);

  it('no command raised CROSSSLOT on any node', () => {
    expect(cluster.crossSlotErrors() - crossSlotBefore).toBe(0);
  });
});
