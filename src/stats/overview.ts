/**
 * The one function behind every figure an operator sees: `kvtier stats`,
 * GET /admin/stats/overview and the dashboard all show `computeOverview` of
 * the same store totals, and the charts show `computeSeries` of its history.
 *
 *   cost          = hit × P_hit + miss × P_miss + output × P_out        (what the traffic is billed)
 *   cost, no cache = (hit + miss) × P_miss + output × P_out             (the same traffic, every prompt computed)
 *   revenue / engine-hour = cost / engine-hours;  margin = 1 − GPU cost / revenue
 */
import { blocksGauge, bytesGauge, C, parseTenantCounter } from './counter-names.ts';
import type { Pricing } from './pricing.ts';
import type { StatsPoint } from './stats-store.ts';

export interface TenantFigures {
  tenant: string;
  requests: number;
  hitTokens: number;
  missTokens: number;
  outputTokens: number;
  /** Hit prompt tokens / prompt tokens. */
  hitRate: number;
  costUsd: number;
  storedBytes: number;
  storedBlocks: number;
}

export interface Overview {
  requests: number;
  requestsWithHit: number;
  tokens: { prompt: number; hit: number; miss: number; output: number };
  hitRate: { byTokens: number; byRequests: number };
  cost: { usd: number; withoutCacheUsd: number; savedUsd: number; savedFraction: number; perMillionPromptUsd: number };
  storage: {
    bytes: number;
    blocks: number;
    byClass: Record<string, { bytes: number; blocks: number }>;
    /** Of `bytes`/`blocks`, the prefix units' tails (usage tag "k:tail": the plane's records say which are tails). */
    tails: { bytes: number; blocks: number };
  };
  gc: {
    runs: number;
    expired: { blocks: number; bytes: number };
    evicted: { blocks: number; bytes: number };
    purged: { blocks: number; bytes: number };
  };
  io: { bytesRead: number; bytesWritten: number; blocksWritten: number; errors: number };
  engine: {
    upHours: number;
    busyHours: number;
    /** Fraction of up time spent on requests. */
    utilization: number;
    gpuHourUsd: number;
    gpusPerEngine: number;
    gpuCostUsd: number;
    revenuePerEngineHourUsd: number;
    /** 1 − GPU cost / revenue; null before any revenue. */
    grossMargin: number | null;
  };
  tenants: TenantFigures[];
  pricing: Pricing;
}

const ratio = (a: number, b: number): number => (b > 0 ? a / b : 0);
/** Cents are not enough at $0.0028 per million tokens: keep 10 decimals, drop float noise. */
const usd = (value: number): number => Math.round(value * 1e10) / 1e10;

export function costUsd(pricing: Pricing, hit: number, miss: number, output: number): number {
  return (hit * pricing.hitPerMillion + miss * pricing.missPerMillion + output * pricing.outputPerMillion) / 1e6;
}

export function computeOverview(totals: { counters: Record<string, number>; gauges: Record<string, number> }, pricing: Pricing, topTenants = 10): Overview {
  const c = (name: string): number => totals.counters[name] ?? 0;
  const g = (name: string): number => totals.gauges[name] ?? 0;
  const hit = c(C.hitTokens);
  const miss = c(C.missTokens);
  const output = c(C.outputTokens);
  const cost = costUsd(pricing, hit, miss, output);
  const withoutCache = costUsd(pricing, 0, hit + miss, output);

  const byClass: Record<string, { bytes: number; blocks: number }> = {};
  for (const name of Object.keys(totals.gauges)) {
    const match = /^c:(.+)\|(bytes|blocks)$/.exec(name);
    if (!match) continue;
    byClass[match[1]] ??= { bytes: 0, blocks: 0 };
    byClass[match[1]][match[2] as 'bytes' | 'blocks'] = totals.gauges[name];
  }

  const tenants = new Map<string, TenantFigures>();
  for (const [name, value] of Object.entries(totals.counters)) {
    const parsed = parseTenantCounter(name);
    if (!parsed) continue;
    const [tenant, field] = parsed;
    const figures = tenants.get(tenant) ?? { tenant, requests: 0, hitTokens: 0, missTokens: 0, outputTokens: 0, hitRate: 0, costUsd: 0, storedBytes: 0, storedBlocks: 0 };
    if (field === 'requests' || field === 'hitTokens' || field === 'missTokens' || field === 'outputTokens') figures[field] = value;
    tenants.set(tenant, figures);
  }
  for (const figures of tenants.values()) {
    figures.hitRate = ratio(figures.hitTokens, figures.hitTokens + figures.missTokens);
    figures.costUsd = usd(costUsd(pricing, figures.hitTokens, figures.missTokens, figures.outputTokens));
    figures.storedBytes = g(bytesGauge(`t:${figures.tenant}`));
    figures.storedBlocks = g(blocksGauge(`t:${figures.tenant}`));
  }
  const top = [...tenants.values()].sort((a, b) => b.costUsd - a.costUsd || b.requests - a.requests || a.tenant.localeCompare(b.tenant)).slice(0, topTenants);

  const upHours = c(C.engineUpMs) / 3_600_000;
  const busyHours = c(C.engineBusyMs) / 3_600_000;
  const gpuCost = upHours * pricing.gpuHourUsd * pricing.gpusPerEngine;
  return {
    requests: c(C.requests),
    requestsWithHit: c(C.requestsWithHit),
    tokens: { prompt: hit + miss, hit, miss, output },
    hitRate: { byTokens: ratio(hit, hit + miss), byRequests: ratio(c(C.requestsWithHit), c(C.requests)) },
    cost: {
      usd: usd(cost),
      withoutCacheUsd: usd(withoutCache),
      savedUsd: usd(withoutCache - cost),
      savedFraction: ratio(withoutCache - cost, withoutCache),
      perMillionPromptUsd: usd(ratio(hit * pricing.hitPerMillion + miss * pricing.missPerMillion, hit + miss)),
    },
    storage: { bytes: g(bytesGauge('g')), blocks: g(blocksGauge('g')), byClass, tails: { bytes: g(bytesGauge('k:tail')), blocks: g(blocksGauge('k:tail')) } },
    gc: {
      runs: c(C.gcRuns),
      expired: { blocks: c(C.expiredBlocks), bytes: c(C.expiredBytes) },
      evicted: { blocks: c(C.evictedBlocks), bytes: c(C.evictedBytes) },
      purged: { blocks: c(C.purgedBlocks), bytes: c(C.purgedBytes) },
    },
    io: { bytesRead: c(C.bytesRead), bytesWritten: c(C.bytesWritten), blocksWritten: c(C.blocksWritten), errors: c(C.tierErrors) },
    engine: {
      upHours,
      busyHours,
      utilization: ratio(busyHours, upHours),
      gpuHourUsd: pricing.gpuHourUsd,
      gpusPerEngine: pricing.gpusPerEngine,
      gpuCostUsd: usd(gpuCost),
      revenuePerEngineHourUsd: usd(ratio(cost, upHours)),
      grossMargin: cost > 0 ? 1 - gpuCost / cost : null,
    },
    tenants: top,
    pricing,
  };
}

/**
 * Chart series on a fixed time grid (`t`: each interval's end, seconds, for
 * uPlot): deltas of the counters per interval (rates, not totals), gauges at
 * its end. An interval with no traffic is null in the traffic series, not 0,
 * so a burst is one value among gaps (drawn as a point), not a spike falling
 * to zero; an interval the store has no point for is null everywhere.
 */
export interface Series {
  t: number[];
  hitRateTokens: (number | null)[];
  hitRateRequests: (number | null)[];
  hitTokens: (number | null)[];
  missTokens: (number | null)[];
  outputTokens: (number | null)[];
  requests: (number | null)[];
  costUsd: (number | null)[];
  withoutCacheUsd: (number | null)[];
  /** Gauges at each interval's end. */
  storedBytes: (number | null)[];
  storedBlocks: (number | null)[];
  storedBytesByClass: Record<string, (number | null)[]>;
  expiredBlocks: (number | null)[];
  evictedBlocks: (number | null)[];
}

/** The chart grid: intervals of `intervalMs` (a whole number of store steps) ending at multiples of it, from `since` to `until`. */
export interface SeriesWindow {
  since: number;
  until: number;
  stepMs: number;
  /** Most intervals; the interval is the smallest whole number of steps that keeps within it. Default 240. */
  maxPoints?: number;
}

/** The interval a window is charted at: whole store steps, at most `maxPoints` of them across the window. */
export function seriesIntervalMs(window: SeriesWindow): number {
  const maxPoints = window.maxPoints ?? 240;
  return window.stepMs * Math.max(1, Math.ceil((window.until - window.since) / (window.stepMs * maxPoints)));
}

/**
 * `points`: the store's history, ascending, from one step before the
 * window. Without `window`, each interval is between consecutive points.
 */
export function computeSeries(points: StatsPoint[], pricing: Pricing, window?: SeriesWindow): Series {
  const series: Series = {
    t: [],
    hitRateTokens: [],
    hitRateRequests: [],
    hitTokens: [],
    missTokens: [],
    outputTokens: [],
    requests: [],
    costUsd: [],
    withoutCacheUsd: [],
    storedBytes: [],
    storedBlocks: [],
    storedBytesByClass: {},
    expiredBlocks: [],
    evictedBlocks: [],
  };
  if (points.length === 0) return series;
  // Interval ends: the grid's, or each point after the first.
  const ends: number[] = [];
  if (window) {
    const interval = seriesIntervalMs(window);
    // The last interval is the one in progress (it ends at or after `until`).
    for (let end = Math.floor(window.since / interval) * interval + interval; end < window.until + interval; end += interval) ends.push(end);
  } else for (let i = 1; i < points.length; i++) ends.push(points[i].t);
  const classes = new Set<string>();
  for (const point of points) for (const name of Object.keys(point.gauges)) {
    const match = /^c:(.+)\|bytes$/.exec(name);
    if (match) classes.add(match[1]);
  }
  for (const name of classes) series.storedBytesByClass[name] = [];
  const none = () => {
    for (const column of [series.hitRateTokens, series.hitRateRequests, series.hitTokens, series.missTokens, series.outputTokens, series.requests, series.costUsd, series.withoutCacheUsd, series.storedBytes, series.storedBlocks, series.expiredBlocks, series.evictedBlocks]) column.push(null);
    for (const name of classes) series.storedBytesByClass[name].push(null);
  };
  // `before`: the latest point at or before the interval's start (the cumulative counters it starts from).
  let p = 0;
  let before: StatsPoint | undefined;
  for (let e = 0; e < ends.length; e++) {
    const start = e === 0 ? (window ? ends[0] - seriesIntervalMs(window) : points[0].t) : ends[e - 1];
    while (p < points.length && points[p].t <= start) before = points[p++];
    let after: StatsPoint | undefined;
    // A store's history starts with the zero it counted from: with no earlier point, the interval's
    // first point is where its counting starts (else a new store's first traffic is never charted).
    if (before === undefined && p + 1 < points.length && points[p + 1].t <= ends[e]) before = points[p++];
    while (p < points.length && points[p].t <= ends[e]) after = points[p++];
    series.t.push(ends[e] / 1000);
    if (before === undefined || after === undefined) {
      // No point to start from, or none within the interval: no data (not zero traffic).
      none();
      if (after !== undefined) before = after;
      continue;
    }
    const from = before;
    const d = (name: string): number => Math.max(0, (after.counters[name] ?? 0) - (from.counters[name] ?? 0));
    const hit = d(C.hitTokens);
    const miss = d(C.missTokens);
    const output = d(C.outputTokens);
    const requests = d(C.requests);
    const traffic = hit + miss + output + requests > 0;
    const ifTraffic = (value: number): number | null => (traffic ? value : null);
    series.hitRateTokens.push(hit + miss > 0 ? hit / (hit + miss) : null);
    series.hitRateRequests.push(requests > 0 ? d(C.requestsWithHit) / requests : null);
    series.hitTokens.push(ifTraffic(hit));
    series.missTokens.push(ifTraffic(miss));
    series.outputTokens.push(ifTraffic(output));
    series.requests.push(ifTraffic(requests));
    series.costUsd.push(ifTraffic(usd(costUsd(pricing, hit, miss, output))));
    series.withoutCacheUsd.push(ifTraffic(usd(costUsd(pricing, 0, hit + miss, output))));
    series.storedBytes.push(after.gauges[bytesGauge('g')] ?? 0);
    series.storedBlocks.push(after.gauges[blocksGauge('g')] ?? 0);
    for (const name of classes) series.storedBytesByClass[name].push(after.gauges[bytesGauge(`c:${name}`)] ?? 0);
    series.expiredBlocks.push(d(C.expiredBlocks));
    series.evictedBlocks.push(d(C.evictedBlocks));
    before = after;
  }
  return series;
}
