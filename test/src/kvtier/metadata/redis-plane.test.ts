import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { RedisMetadataPlane } from '../../../../src/kvtier/metadata/index.ts';
import { openPlaneNodes } from '../../../helpers/redis-plane-nodes.ts';
import { startRedis, type RedisServer } from '../../../helpers/redis-server.ts';
import { keyOf, planeFixture, recordOf, runPlaneConformance } from './plane-conformance.ts';

let server: RedisServer;
let run = 0;

beforeAll(async () => {
  server = await startRedis();
});

afterAll(async () => {
  await server?.stop();
});

runPlaneConformance('redis', async () => {
  const keyPrefix = `t${run++}:plane:`;
  return planeFixture(() => RedisMetadataPlane.open({ url: server.url, keyPrefix }));
});

describe('RedisMetadataPlane', () => {
  it('a removal on one node reaches the listeners of every other node', async () => {
    const nodes = await openPlaneNodes(server.url, 2);
    const [a, b] = nodes.planes;
    try {
      await a.upsert([recordOf(1), recordOf(2)]);
      const told: string[] = [];
      b.onRemoved((keys) => told.push(...keys));
      await a.remove([keyOf(2)]);
      const deadline = Date.now() + 5000;
      while (told.length === 0 && Date.now() < deadline) await new Promise((resolve) => setTimeout(resolve, 10));
      expect(told).toEqual([keyOf(2)]);
    } finally {
      await nodes.close();
    }
  });

  it('FLUSHALL loses the generation marker: the plane reports a new, untrusted generation', async () => {
    const keyPrefix = `t${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    const admin = new Redis(server.url);
    try {
      const before = await plane.state();
      await plane.markTrusted(before.generation);
      expect((await plane.state()).trusted).toBe(true);
      await plane.upsert([recordOf(1)]);
      await admin.flushall();
      const after = await plane.state();
      expect(after.generation).not.toBe(before.generation);
      expect(after.trusted).toBe(false);
      expect(await plane.get([keyOf(1)])).toEqual([null]);
    } finally {
      admin.disconnect();
      await plane.close();
    }
  });

  // 50k records over 2^12 hashes: ~12 per hash, as 10^6 blocks over the default 2^16.
  it('stays within 200 bytes of Redis memory per record at production fill (used_memory delta)', async () => {
    const keyPrefix = `mem${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: server.url, keyPrefix, bucketBits: 12 });
    const admin = new Redis(server.url);
    try {
      const usedMemory = async () => Number(/used_memory:(\d+)/.exec(await admin.info('memory'))![1]);
      const before = await usedMemory();
      const n = 50_000;
      const batch = [];
      for (let i = 0; i < n; i++) {
        batch.push(recordOf(i, { tenant: `tenant-${i % 50}`, writer: `node-${i % 4}`, lastUseAt: Date.UTC(2026, 0, 1) + i * 1000, depth: i % 30 }));
        if (batch.length === 2000) await plane.upsert(batch.splice(0));
      }
      await plane.upsert(batch);
      const perRecord = ((await usedMemory()) - before) / n;
      expect(perRecord).toBeLessThanOrEqual(200);
      expect((await plane.usage()).blocks.g).toBe(n);
    } finally {
      admin.disconnect();
      await plane.close();
    }
  });
});

describe('RedisMetadataPlane pending-delete journal', () => {
  // A killed run can leave many batches; GC then clears them in its own chunks. Each chunk must cost
  // its own keys, not a read of the whole journal (that made clearing quadratic in the journal's size).
  it('clearing a killed run’s batches in other chunks reads the journal’s batches once, not once per chunk', async () => {
    const keyPrefix = `t${run++}:plane:`;
    const plane = await RedisMetadataPlane.open({ url: server.url, keyPrefix });
    // monitor() opens a duplicate in MONITOR mode; the client it was called on stays open until disconnected.
    const monitorBase = new Redis(server.url);
    const monitor = await monitorBase.monitor();
    const admin = new Redis(server.url);
    try {
      const records = Array.from({ length: 200 }, (_, n) => recordOf(n, { trafficClass: 'agent', lastUseAt: Date.UTC(2026, 0, 1) + n }));
      await plane.upsert(records);
      for (let batch = 0; batch < 10; batch++) await plane.removeByLastUse({ trafficClass: 'agent', maxLastUseAt: Date.UTC(2026, 1, 1), limit: 20, journal: true });
      const pending = await plane.pendingDeletes();
      expect(pending.sort()).toEqual(records.map((record) => record.key).sort());
      // MONITOR delivers asynchronously and in order, so the SMEMBERS of the pendingDeletes() above can
      // still arrive after this point: count only between two markers sent through the same server.
      let journalReads = 0;
      let phase: 'before' | 'counting' | 'done' = 'before';
      monitor.on('monitor', (_time: string, args: string[]) => {
        if (args[0].toLowerCase() === 'get' && args[1] === `${keyPrefix}marker:start`) phase = 'counting';
        else if (args[0].toLowerCase() === 'get' && args[1] === `${keyPrefix}marker:end`) phase = 'done';
        else if (phase === 'counting' && args[0].toLowerCase() === 'smembers' && args[1]?.startsWith(keyPrefix)) journalReads++;
      });
      await admin.get(`${keyPrefix}marker:start`);
      for (let i = 0; i < pending.length; i += 7) await plane.clearPendingDeletes(pending.slice(i, i + 7));
      expect(await plane.pendingDeletes()).toEqual([]);
      await admin.get(`${keyPrefix}marker:end`);
      await new Promise<void>((resolve, reject) => {
        const check = () => (phase === 'done' ? resolve() : undefined);
        monitor.on('monitor', check);
        monitor.once('error', reject);
        check();
      });
      // The explode (one read of the batches) plus pendingDeletes' two reads at the end.
      expect(journalReads).toBeLessThanOrEqual(3);
    } finally {
      monitor.disconnect();
      monitorBase.disconnect();
      admin.disconnect();
      await plane.close();
    }
  });
});
