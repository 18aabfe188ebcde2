/**
 * The cluster counters: several recorders (processes) add up, totals and
 * history survive a restart, LMDB and a real redis-server behave alike, and
 * the overview's cost math matches the price list by hand.
 */
import { describe, expect, it } from 'vitest';

import {
  C,
  computeOverview,
  computeSeries,
  DEFAULT_PRICING,
  LmdbStatsStore,
  loadPricing,
  RedisStatsStore,
  StatsRecorder,
  type StatsPoint,
  type StatsStore,
} from '../../../src/stats/index.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { tempDir } from '../kvtier/fixtures.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const dir = suiteFixture(() => tempDir('kvtier-stats-'), (d) => d.remove());
const redis = suiteFixture(() => startRedis(), (r) => r.stop());

const usage = (tenant: string, prompt: number, cached: number, output: number) => ({ tenant, trafficClass: 'chat', promptTokens: prompt, cachedTokens: cached, completionTokens: output, workerMs: 10 });

const backends: Array<[string, (name: string) => Promise<StatsStore>]> = [
  ['lmdb', async (name) => LmdbStatsStore.open({ path: `${dir().path}/${name}`, stepMs: 1000 })],
  ['redis', async (name) => RedisStatsStore.open({ url: redis().url, keyPrefix: `test:${name}:`, stepMs: 1000 })],
];

describe.each(backends)('%s stats store', (_kind, open) => {
  it('sums two processes, keeps totals and history across a restart, and a restarted tier counts from zero', async () => {
    let now = Date.UTC(2026, 11, 2, 12, 0, 0);
    const clock = () => now;
    const storeA = await open('cluster');
    const storeB = await open('cluster');
    const api = new StatsRecorder({ store: storeA, now: clock });
    let tierGc = { runs: 1, expired: { blocks: 5, bytes: 500 }, evicted: { blocks: 0, bytes: 0 } };
    const worker = new StatsRecorder({
      store: storeB,
      now: clock,
      sampleTier: async () => ({
        cache: { bytesRead: 0, bytesWritten: 1000, blocksWritten: 10, gc: tierGc, errors: {} },
        usage: { bytes: { g: 2048, 'c:chat': 2048, 't:acme': 2048 }, blocks: { g: 2, 'c:chat': 2, 't:acme': 2 } },
      }),
    });
    api.record(usage('acme', 640, 512, 20));
    api.record(usage('beta', 100, 0, 5));
    await api.flush();
    await worker.flush();
    now += 1000;
    api.record(usage('acme', 640, 640, 10));
    // The worker restarted its tier: its counters went back to 1 run / 2 expired.
    tierGc = { runs: 1, expired: { blocks: 2, bytes: 200 }, evicted: { blocks: 1, bytes: 100 } };
    await api.flush();
    await worker.flush();
    await api.flush(); // nothing new: adds nothing
    await storeA.close();
    await storeB.close();

    const reopened = await open('cluster');
    const totals = await reopened.totals();
    expect(totals.counters[C.requests]).toBe(3);
    expect(totals.counters[C.requestsWithHit]).toBe(2);
    expect(totals.counters[C.hitTokens]).toBe(1152);
    expect(totals.counters[C.missTokens]).toBe(228);
    expect(totals.counters[C.outputTokens]).toBe(35);
    expect(totals.counters['tenant:acme:hitTokens']).toBe(1152);
    expect(totals.counters[C.gcRuns]).toBe(2);
    expect(totals.counters[C.expiredBlocks]).toBe(7);
    expect(totals.counters[C.evictedBlocks]).toBe(1);
    expect(totals.gauges['c:chat|bytes']).toBe(2048);
    const history = await reopened.history(0, now);
    // A new store's history starts with the zero it counted from, one step before its first point.
    expect(history.map((p) => p.t)).toEqual([now - 2000, now - 1000, now]);
    expect(history[0].counters).toEqual({});
    expect(history[2].counters[C.hitTokens]).toBe(1152);
    expect(Object.keys(history[2].counters).some((name) => name.startsWith('tenant:'))).toBe(false);
    expect(Object.keys(history[2].gauges).some((name) => name.startsWith('t:'))).toBe(false);

    const series = computeSeries(history, DEFAULT_PRICING);
    expect(series.t).toEqual([(now - 1000) / 1000, now / 1000]);
    expect(series.hitTokens).toEqual([512, 640]);
    expect(series.hitRateTokens).toEqual([512 / (512 + 228), 1]);
    expect(series.expiredBlocks).toEqual([5, 2]);
    await reopened.close();
  });
});

describe('series on a window grid', () => {
  // A new store's zero point and its first traffic point can fall in one grid interval (15 s intervals
  // over 5 s steps): that interval's traffic is the difference between them, not "no data".
  it.each([0, 5_000, 10_000])('counts a new store\'s first traffic when its zero point is %i ms into the interval', (offset) => {
    const start = Date.UTC(2026, 11, 5, 8, 0, 0) + offset;
    const points: StatsPoint[] = [
      { t: start, counters: {}, gauges: {} },
      { t: start + 5_000, counters: { [C.missTokens]: 591, [C.requests]: 1 }, gauges: {} },
      { t: start + 10_000, counters: { [C.missTokens]: 591, [C.requests]: 1 }, gauges: {} },
    ];
    const until = start + 60_000;
    const series = computeSeries(points, DEFAULT_PRICING, { since: until - 3_600_000, until, stepMs: 5_000 });
    expect(series.t.length).toBeLessThanOrEqual(241);
    expect(series.missTokens.filter((v) => v !== null)).toEqual([591]);
    expect(series.requests.filter((v) => v !== null)).toEqual([1]);
  });
});

describe('recorder over several workers (BullMQ)', () => {
  it('follows each worker on its own, sums their stored bytes, and counts each up worker as an engine', async () => {
    let now = Date.UTC(2026, 11, 2, 12, 0, 0);
    const store = LmdbStatsStore.open({ path: `${dir().path}/workers`, stepMs: 1000 });
    const worker = (expired: number, bytes: number) => ({
      cache: { gc: { expired: { blocks: expired } } },
      usage: { bytes: { g: bytes, 'c:chat': bytes }, blocks: { g: 1, 'c:chat': 1 } },
    });
    let sources = [
      { id: 'w1', sample: worker(3, 100) },
      { id: 'w2', sample: worker(4, 200) },
    ];
    const recorder = new StatsRecorder({ store, now: () => now, sampleTier: async () => ({ sources, enginesUp: sources.length }) });
    await recorder.flush();
    now += 60_000;
    sources = [
      { id: 'w1', sample: worker(5, 100) },
      { id: 'w3', sample: worker(1, 50) },
    ];
    await recorder.flush();
    const totals = await store.totals();
    expect(totals.counters[C.expiredBlocks]).toBe(3 + 4 + 2 + 1);
    expect(totals.counters[C.engineUpMs]).toBe(2 * 60_000);
    expect(totals.gauges['c:chat|bytes']).toBe(150);
    expect(totals.gauges['g|blocks']).toBe(2);
    await store.close();
  });
});

describe('overview', () => {
  it('bills at the price list and compares with no cache', () => {
    const pricing = loadPricing({ KVTIER_GPU_HOUR_USD: '2' });
    expect(pricing.source).toMatch(/DeepSeek/);
    const overview = computeOverview(
      {
        counters: { [C.requests]: 4, [C.requestsWithHit]: 3, [C.hitTokens]: 3_000_000, [C.missTokens]: 1_000_000, [C.outputTokens]: 500_000, [C.engineUpMs]: 3_600_000, [C.engineBusyMs]: 1_800_000 },
        gauges: {},
      },
      pricing,
    );
    // 3M × 0.0028 + 1M × 0.14 + 0.5M × 0.28 = 0.0084 + 0.14 + 0.14
    expect(overview.cost.usd).toBeCloseTo(0.2884, 10);
    // 4M × 0.14 + 0.5M × 0.28 = 0.56 + 0.14
    expect(overview.cost.withoutCacheUsd).toBeCloseTo(0.7, 10);
    expect(overview.hitRate).toEqual({ byTokens: 0.75, byRequests: 0.75 });
    expect(overview.engine.revenuePerEngineHourUsd).toBeCloseTo(0.2884, 10);
    expect(overview.engine.grossMargin).toBeCloseTo(1 - 2 / 0.2884, 10);
    expect(overview.engine.utilization).toBe(0.5);
    expect(() => loadPricing({ KVTIER_PRICE_MISS_PER_M: '-1' })).toThrow(/KVTIER_PRICE_MISS_PER_M=-1/);
  });
});
