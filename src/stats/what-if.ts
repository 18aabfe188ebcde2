/**
 * The retention what-if: per class, what TTLs of 5 min, 1 h, 24 h, 3 d and
 * 7 d (and the policy in force) would have hit on the traffic actually
 * served, what storage each would have held, and the net value.
 *
 * From the reuse-gap histogram (counter-names.ts `gap:…`, fed by every hit
 * the tier saw: src/kvtier/reuse-gaps.ts). Under TTL T a hit happens exactly
 * when its gap is < T, so for T no longer than the class's TTL in force the
 * hit tokens are exact (whole buckets: every TTL asked for is a bucket edge);
 * for a longer T they are a lower bound (hits the current policy lost to
 * expiry were never seen), and are shown as such.
 *
 * Storage: a block held under TTL T between two uses sits for min(gap, T);
 * byte-days = bytes per block × Σ min(gap, T) over hits (exact per bucket:
 * the sum of gaps below T, T for each gap at or past it). Bytes per block
 * are the class's stored bytes / blocks (the plane's records), else the
 * whole cluster's. Not counted: each block's last idle stretch before it
 * expires (at most T per block), so storage is a lower bound too.
 * Priced at KVTIER_STORAGE_USD_PER_GB_MONTH (GB = 1e9 bytes, month = 30 days).
 *
 *   saved(T)  = hit tokens(T) × (miss price − hit price)
 *   net(T)    = saved(T) − storage cost(T)
 */
import { blocksGauge, bytesGauge, parseGapCounter } from './counter-names.ts';
import type { Pricing } from './pricing.ts';

export const WHAT_IF_TTLS: ReadonlyArray<{ label: string; ttlMs: number }> = [
  { label: '5m', ttlMs: 5 * 60_000 },
  { label: '1h', ttlMs: 3_600_000 },
  { label: '24h', ttlMs: 86_400_000 },
  { label: '3d', ttlMs: 3 * 86_400_000 },
  { label: '7d', ttlMs: 7 * 86_400_000 },
];

export interface WhatIfRow {
  /** `5m` … `7d`, or `current`. */
  ttl: string;
  ttlMs: number;
  hitTokens: number;
  /** true: exact (T ≤ the TTL in force); false: a lower bound. */
  exact: boolean;
  savedUsd: number;
  storageByteDays: number;
  storageUsd: number;
  netUsd: number;
}

export interface WhatIfClass {
  trafficClass: string;
  /** The class's TTL in force (null when the policy does not name the class). */
  currentTtlMs: number | null;
  bytesPerBlock: number;
  rows: WhatIfRow[];
}

export interface WhatIf {
  storageUsdPerGbMonth: number;
  classes: WhatIfClass[];
}

interface Buckets {
  /** upper edge (ms, Infinity for the last) → figures */
  edges: Map<number, { tokens: number; blocks: number; ms: number }>;
}

const round = (value: number): number => Math.round(value * 1e10) / 1e10;

export function computeWhatIf(totals: { counters: Record<string, number>; gauges: Record<string, number> }, pricing: Pricing, ttlMsByClass: Record<string, number>): WhatIf {
  const byClass = new Map<string, Buckets>();
  for (const [name, value] of Object.entries(totals.counters)) {
    const parsed = parseGapCounter(name);
    if (!parsed) continue;
    const buckets = byClass.get(parsed.trafficClass) ?? { edges: new Map() };
    byClass.set(parsed.trafficClass, buckets);
    const edge = parsed.upperEdgeMs ?? Number.POSITIVE_INFINITY;
    const figures = buckets.edges.get(edge) ?? { tokens: 0, blocks: 0, ms: 0 };
    figures[parsed.field] += value;
    buckets.edges.set(edge, figures);
  }
  const storageUsdPerGbMonth = pricing.storageUsdPerGbMonth;
  const g = (name: string) => totals.gauges[name] ?? 0;
  const classes: WhatIfClass[] = [];
  for (const trafficClass of [...new Set([...byClass.keys(), ...Object.keys(ttlMsByClass)])].sort()) {
    const buckets = [...(byClass.get(trafficClass)?.edges ?? new Map()).entries()].sort((a, b) => a[0] - b[0]);
    const classBlocks = g(blocksGauge(`c:${trafficClass}`));
    const bytesPerBlock = classBlocks > 0 ? g(bytesGauge(`c:${trafficClass}`)) / classBlocks : g(blocksGauge('g')) > 0 ? g(bytesGauge('g')) / g(blocksGauge('g')) : 0;
    const current = Object.hasOwn(ttlMsByClass, trafficClass) ? ttlMsByClass[trafficClass] : null;
    const row = (ttl: string, ttlMs: number, exact: boolean): WhatIfRow => {
      let hitTokens = 0;
      let blockMs = 0;
      for (const [edge, f] of buckets) {
        // Every asked TTL is a bucket edge: a bucket is wholly below T or wholly at/after it.
        if (edge <= ttlMs) {
          hitTokens += f.tokens;
          blockMs += f.ms;
        } else blockMs += f.blocks * ttlMs;
      }
      const storageByteDays = (bytesPerBlock * blockMs) / 86_400_000;
      const savedUsd = (hitTokens * (pricing.missPerMillion - pricing.hitPerMillion)) / 1e6;
      const storageUsd = (storageByteDays / 1e9 / 30) * storageUsdPerGbMonth;
      return { ttl, ttlMs, hitTokens, exact, savedUsd: round(savedUsd), storageByteDays: round(storageByteDays), storageUsd: round(storageUsd), netUsd: round(savedUsd - storageUsd) };
    };
    const rows = WHAT_IF_TTLS.map(({ label, ttlMs }) => row(label, ttlMs, current !== null && ttlMs <= current));
    if (current !== null) {
      // The policy in force: every hit seen (all had gaps below it), their gaps as held.
      let hitTokens = 0;
      let blockMs = 0;
      for (const [, f] of buckets) {
        hitTokens += f.tokens;
        blockMs += f.ms;
      }
      const storageByteDays = (bytesPerBlock * blockMs) / 86_400_000;
      const savedUsd = (hitTokens * (pricing.missPerMillion - pricing.hitPerMillion)) / 1e6;
      const storageUsd = (storageByteDays / 1e9 / 30) * storageUsdPerGbMonth;
      rows.push({ ttl: 'current', ttlMs: current, hitTokens, exact: true, savedUsd: round(savedUsd), storageByteDays: round(storageByteDays), storageUsd: round(storageUsd), netUsd: round(savedUsd - storageUsd) });
    }
    classes.push({ trafficClass, currentTtlMs: current, bytesPerBlock: round(bytesPerBlock), rows });
  }
  return { storageUsdPerGbMonth, classes };
}
