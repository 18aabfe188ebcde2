/**
 * One GC lease per plane shard on a real Redis Cluster (src/cluster/sharded-gc.ts): two runners — a
 * runner process and one in this process — split a 4-shard plane's shards between them, each shard
 * collected once; the runner process killed with SIGKILL while holding its shards' leases releases
 * them by lease expiry, and the other runner then takes and collects them. Waits are on observed
 * state (child output, lease keys gone), never on time.
 */
import { spawn } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';

import { describe, expect, it } from 'vitest';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { RedisLeaderLock, runShardedGc, shardLeaseKey } from '../../../src/cluster/index.ts';
import { BlockIndex, createRedisClient, DAY_MS, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc, type BlockRecord, type GcReport } from '../../../src/kvtier/index.ts';
import { RedisMetadataPlane } from '../../../src/kvtier/metadata/index.ts';
import { startRedisCluster } from '../../helpers/redis-cluster.ts';
import { keyOf } from '../kvtier/metadata/plane-conformance.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';
import { childArgs } from '../../helpers/ts-child.ts';

const CHILD = new URL('./sharded-gc-child.ts', import.meta.url).pathname;
const T0 = Date.UTC(2026, 0, 1);
const cluster = suiteFixture(() => startRedisCluster(), (c) => c.stop(), 60_000);

const shardOf = (key: string) => parseInt(key.slice(0, 2), 16) >> 6;

describe('GC runners taking plane shards under one lease each', () => {
  it('two runners split the shards; a runner killed with its leases held releases them by expiry and the other takes them', async () => {
    const dir = await mkdtemp(join(tmpdir(), 'kvt-sharded-gc-'));
    const keyPrefix = 'sgc:plane:';
    const plane = await RedisMetadataPlane.open({ url: cluster().address, keyPrefix, shards: 4 });
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const index = BlockIndex.open({ path: join(dir, 'index') });
    const redis = createRedisClient(cluster().address);
    const policy = new RetentionPolicy(defaultPolicyDoc());
    const now = T0 + 10 * DAY_MS;
    const clock = new ManualClock(now);
    try {
      const records: BlockRecord[] = Array.from({ length: 120 }, (_, n) => ({ key: keyOf(n), trafficClass: 'agent', tenant: 'acme', sizeBytes: 1, writer: 'node-a', createdAt: T0, lastUseAt: T0, ttlMs: 0, depth: 0 }));
      for (const record of records) await store.put(record.key, new Uint8Array([7]));
      await plane.upsert(records);
      await plane.markTrusted((await plane.state()).generation);
      const keysOfShard = (shard: number) => records.map((r) => r.key).filter((key) => shardOf(key) === shard);

      // Runner process A takes two shards and then holds their leases.
      const child = spawn(process.execPath, [...childArgs(CHILD), cluster().address, keyPrefix, join(dir, 'blocks'), join(dir, 'child'), String(now), 'runner-a', '2'], { stdio: ['ignore', 'pipe', 'pipe'] });
      let stderr = '';
      child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
      const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
      const lines: Record<string, unknown>[] = [];
      const holding = await new Promise<number[]>((resolve, reject) => {
        createInterface({ input: child.stdout! }).on('line', (text) => {
          const line = JSON.parse(text) as Record<string, unknown>;
          lines.push(line);
          if ('holding' in line) resolve(line.holding as number[]);
        });
        void exited.then(() => reject(new Error(`runner A exited before holding its shards; stderr:\n${stderr}`)));
      });
      expect(holding).toHaveLength(2);
      for (const shard of holding) expect(await store.has(keysOfShard(shard))).toEqual(keysOfShard(shard).map(() => false));

      // Runner B (this process) meanwhile: the two other shards, never A's.
      const gcShard = (shard: number, signal: AbortSignal): Promise<GcReport> => runGc({ plane, index, store, policy, clock }, { shards: [shard], signal, sweepOrphans: false });
      const b = await runShardedGc({ redis, owner: 'runner-b', shards: 4, ttlMs: 1000 }, gcShard);
      const free = [0, 1, 2, 3].filter((shard) => !holding.includes(shard));
      expect(b.ran.map((ran) => ran.shard).sort()).toEqual(free);
      expect(b.skipped.map((skipped) => skipped.shard).sort()).toEqual([...holding].sort());
      expect(b.skipped.every((skipped) => skipped.heldBy?.owner === 'runner-a')).toBe(true);
      for (const ran of b.ran) expect(ran.report.removed.expired.blocks).toBe(keysOfShard(ran.shard).length);
      expect(await store.has(records.map((r) => r.key))).toEqual(records.map(() => false));

      // New expired records in A's shards, then A dies holding their leases.
      const again = records.filter((record) => holding.includes(shardOf(record.key)));
      for (const record of again) await store.put(record.key, new Uint8Array([7]));
      await plane.upsert(again);
      child.kill('SIGKILL');
      await exited;
      const stillHeld = await runShardedGc({ redis, owner: 'runner-b', shards: 4, only: holding, ttlMs: 1000 }, gcShard);
      expect(stillHeld.ran).toEqual([]);
      // Its leases lapse (nobody renews them): wait until both keys are gone.
      const locks = holding.map((shard) => new RedisLeaderLock(redis, shardLeaseKey(shard), { owner: 'observer', ttlMs: 1000 }));
      await waitUntil(async () => (await Promise.all(locks.map((lock) => lock.holder()))).every((holder) => holder === null));
      const taken = await runShardedGc({ redis, owner: 'runner-b', shards: 4, ttlMs: 1000 }, gcShard);
      expect(taken.ran.map((ran) => ran.shard).sort()).toEqual([0, 1, 2, 3]);
      const removedNow = taken.ran.reduce((sum, ran) => sum + ran.report.removed.expired.blocks, 0);
      expect(removedNow).toBe(again.length);
      expect(await store.has(again.map((r) => r.key))).toEqual(again.map(() => false));
      expect(cluster().crossSlotErrors()).toBe(0);
    } finally {
      redis.disconnect();
      await plane.close();
      await index.close();
      await store.close();
      await rm(dir, { recursive: true, force: true });
    }
  }, 120_000);
});

/** Polls an observed state on loopback until it holds (deadline 30 s). */
async function waitUntil(holds: () => Promise<boolean>): Promise<void> {
  const deadline = Date.now() + 30_000;
  while (!(await holds())) {
    if (Date.now() > deadline) throw new Error('state not reached within 30 s');
    await new Promise((resolve) => setTimeout(resolve, 50)); // poll interval, not a wait for an event
  }
}
