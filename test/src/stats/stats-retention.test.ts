/**
 * History retention covers the dashboard's 7-day view: a week and a half of
 * flushes leaves points back to 7 days (and its left edge), every step of
 * the full-resolution window, at most one point per coarse interval before
 * it, none past the retention; and the 7-day series computed from the
 * thinned history equals the one computed from every point. LMDB and a real
 * redis-server alike.
 */
import { describe, expect, it } from 'vitest';

import { C, coarseStepMs, computeSeries, DEFAULT_PRICING, LmdbStatsStore, RedisStatsStore, type StatsStore } from '../../../src/stats/index.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { tempDir } from '../kvtier/fixtures.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';

const DAY = 86_400_000;
const STEP = 600_000;
const FULL = 6 * 3_600_000;

const dir = suiteFixture(() => tempDir('kvtier-stats-retention-'), (d) => d.remove());
const redis = suiteFixture(() => startRedis(), (r) => r.stop());

const backends: Array<[string, (name: string, options: { fullResolutionMs?: number; retentionMs?: number }) => Promise<StatsStore>]> = [
  ['lmdb', async (name, options) => LmdbStatsStore.open({ path: `${dir().path}/${name}`, stepMs: STEP, ...options })],
  ['redis', async (name, options) => RedisStatsStore.open({ url: redis().url, keyPrefix: `retention:${name}:`, stepMs: STEP, ...options })],
];

describe.each(backends)('%s stats history retention', (kind, open) => {
  it('keeps 7 days for the 7-day view, thinned past the full-resolution window, and charts it as from every point', async () => {
    const thinned = await open(`${kind}-thinned`, { fullResolutionMs: FULL });
    const every = await open(`${kind}-every`, { fullResolutionMs: 365 * DAY, retentionMs: 365 * DAY });
    const start = Date.UTC(2026, 10, 20, 0, 1, 7);
    const end = start + 9 * DAY;
    // Traffic that varies by hour, with a gap of a day (no flushes) in the middle: thinning must resume after it.
    for (let now = start, i = 0; now <= end; now += STEP, i++) {
      if (now > start + 4 * DAY && now < start + 5 * DAY) continue;
      const deltas = { [C.requests]: 1 + (i % 7), [C.hitTokens]: (i * 37) % 500, [C.missTokens]: 100 + ((i * 11) % 300) };
      const gauges = { bytes: 1000 + i };
      await thinned.add(deltas, gauges, now);
      await every.add(deltas, gauges, now);
    }
    try {
      const coarse = coarseStepMs(STEP);
      const all = await thinned.history(0, end);
      const reference = await every.history(0, end);
      // Retention: nothing older than 8 days; back to the 7-day view's left edge.
      expect(all[0].t).toBeGreaterThanOrEqual(end - 8 * DAY);
      expect(all[0].t).toBeLessThanOrEqual(end - 7 * DAY - coarse);
      // Full resolution inside the window: every step the reference has.
      const recent = (points: typeof all) => points.filter((p) => p.t >= end - FULL).map((p) => p.t);
      expect(recent(all)).toEqual(recent(reference));
      // Older: at most one point per coarse interval, so far fewer points than the reference keeps.
      const old = all.filter((p) => p.t < end - FULL - coarse);
      const intervals = new Set(old.map((p) => Math.ceil(p.t / coarse)));
      expect(intervals.size).toBe(old.length);
      expect(old.length).toBeGreaterThan(100);
      expect(all.length).toBeLessThan(reference.filter((p) => p.t >= all[0].t).length / 3);
      // The 7-day chart: the same series as from every point.
      const window = { since: end - 7 * DAY, until: end, stepMs: STEP };
      const from = (points: typeof all) => computeSeries(points.filter((p) => p.t >= Math.floor(window.since / coarse) * coarse - STEP), DEFAULT_PRICING, window);
      const chart = from(all);
      expect(chart.t.length).toBeGreaterThan(180);
      expect(chart).toEqual(from(reference));
      expect(chart.requests.filter((v) => v !== null).length).toBeGreaterThan(140);
    } finally {
      await thinned.close();
      await every.close();
    }
  }, 600_000);
});
