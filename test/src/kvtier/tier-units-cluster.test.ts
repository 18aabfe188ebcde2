/**
 * Prefix units across a cluster: two workers (each its own scheduler, KvTier
 * and LMDB index) share one fs block store and one Redis metadata plane
 * (a real redis-server). A unit worker A writes is found by worker B
 * through the plane (B's own index has never seen it) and continues bit for
 * bit; B's GC expires A's units by their class (blocks and tails, on
 * storage and in the plane), so neither worker hits them afterwards.
 */
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../../inference-core/index.ts';
import { ensureLfm2Model } from '../../../inference-core/synthetic/lfm2-synthetic.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { DAY_MS, KvTier, ManualClock, RedisMetadataPlane } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/scheduler/cache-adapter.ts';
import { engineUnitPort, UnitPolicy } from '../../../src/scheduler/units.ts';
import { startRedis, type RedisServer } from '../../helpers/redis-server.ts';
import { TEST_DATA_DIR, randomTokens } from '../../inference-core/engine-fixtures.ts';
import { greedyAlone, prefilledOf, schedulerJob, startScheduler, tokensOf } from '../scheduler/scheduler-fixtures.ts';

let engine: LoadedEngine;
let redis: RedisServer;
beforeAll(async () => {
  redis = await startRedis();
  engine = await loadEngine(ensureLfm2Model({ dataDir: TEST_DATA_DIR }), { kvDtype: 'f16', threads: 1, poolBytes: 32 * 2 ** 20, maxBatch: 4 });
}, 120_000);
afterAll(async () => {
  engine?.destroy();
  await redis?.stop();
});

describe('prefix units over shared storage and a Redis plane (lfm2)', () => {
  it('worker A writes a unit, worker B hits it through the plane and continues exactly; GC on B expires A\'s agent units by class', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-units-cluster-'));
    const run = randomUUID().slice(0, 8);
    const clock = new ManualClock(Date.now());
    const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
    const workers = await Promise.all(
      ['a', 'b'].map(async (name) => {
        const plane = await RedisMetadataPlane.open({ url: redis.url, keyPrefix: `${run}:plane:` });
        const tier = await KvTier.open({ dataDir: join(dir, name), store, blockTokens: 64, hotCacheBytes: 0, clock, metadataPlane: plane, nodeId: name });
        const cache = await KvTierCache.create(tier, engine.kvLayout);
        const trace = startScheduler({ engine, cache }, { units: new UnitPolicy(engineUnitPort(engine), cache, { intervalTokens: 0, commonPrefixRequests: 0 }), retainSequences: 0 });
        return { tier, plane, ...trace };
      }),
    );
    const [a, b] = workers;
    const submit = async (w: (typeof workers)[number], id: string, tokens: number[], trafficClass = 'agent') => {
      w.scheduler.submit(schedulerJob(id, tokens, { trafficClass }, 6));
      const events = await w.finished(id);
      await w.tier.flush();
      return { cached: prefilledOf(events).cachedTokens, reply: tokensOf(events) };
    };
    try {
      const ab = randomTokens(170, engine.vocabSize, 61);
      expect((await submit(a, 'a1', ab)).cached).toBe(0);
      const abc = [...ab, ...randomTokens(30, engine.vocabSize, 62)];
      const onB = await submit(b, 'b1', abc);
      expect(onB.cached).toBe(170);
      expect(onB.reply).toEqual(greedyAlone(engine, abc, 6));
      // B's index had neither the unit nor its blocks: it found them through the plane
      expect(b.tier.stats().units).toMatchObject({ loaded: 1, written: 2 });
      // a chat unit next to them, then 4 days: agent (3 d) expired, chat (7 d) kept
      const chat = randomTokens(150, engine.vocabSize, 63);
      await submit(a, 'a2', chat, 'chat');
      clock.advance(4 * DAY_MS);
      const report = await b.tier.gc();
      expect(report.plane.trusted).toBe(true);
      expect(report.byClass.agent?.expired.blocks).toBeGreaterThan(0);
      expect(report.byClass.chat?.expired.blocks ?? 0).toBe(0);
      expect((await submit(a, 'a3', abc)).cached).toBe(0);
      expect((await submit(b, 'b2', [...chat, ...randomTokens(20, engine.vocabSize, 64)], 'chat')).cached).toBe(150);
    } finally {
      for (const w of workers) {
        await w.scheduler.close();
        await w.tier.close();
        await w.plane.close();
      }
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    }
  }, 120_000);
});
