/**
 * The what-if's raw material: for every hit on a block the node index knows,
 * the gap since that block's previous use, by the hitting request's traffic
 * class, as hit tokens in log-spaced buckets from 1 s to 30 days.
 *
 * Why this answers "what would TTL T have hit": a hit and a store both set a
 * block's last use to now, so the sequence of last uses is the same under
 * any TTL, and a block's parent was used at least as recently as the block
 * (a prefix is used whole). Under TTL T a request hits exactly the blocks
 * whose gap is < T. For T no longer than the TTL in force that is exact (the
 * tokens in buckets whose upper edge is ≤ T); for a longer T it is a lower
 * bound (misses on blocks that expired are not gaps seen here). The buckets'
 * edges include 5 min, 1 h, 24 h, 3 d and 7 d, so those TTLs are sums of
 * whole buckets.
 *
 * A hit on a block still being written counts from its store call (or its
 * last hit since; block-flights.ts). A request served from the engine's
 * retained sequences still looks its prefix up here, so those hits count
 * too. Hits adopted from the plane or storage carry no previous use here and
 * are not counted (a lower bound again).
 * With touchIntervalMs > 0 an index entry's last use may be up to that old,
 * so gaps read long by at most that much (conservative).
 */

/** Upper edges of the buckets, ms: bucket i holds gaps in [edge[i-1], edge[i]); one more bucket holds ≥ 30 days. */
export const REUSE_GAP_EDGES_MS: readonly number[] = Object.freeze(
  [1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400, 21600, 43200, 86400, 172800, 259200, 432000, 604800, 1209600, 2592000].map((s) => s * 1000),
);

export const REUSE_GAP_BUCKETS = REUSE_GAP_EDGES_MS.length + 1;

/** The bucket of a gap (binary search over 24 edges: 5 compares). */
export function reuseGapBucket(gapMs: number): number {
  let lo = 0;
  let hi = REUSE_GAP_EDGES_MS.length;
  while (lo < hi) {
    const mid = (lo + hi) >>> 1;
    if (gapMs < REUSE_GAP_EDGES_MS[mid]) hi = mid;
    else lo = mid + 1;
  }
  return lo;
}

/** One class's cumulative figures per bucket: hit tokens, hit blocks, and the sum of their gaps (ms, per block). */
export interface ReuseGapBuckets {
  tokens: number[];
  blocks: number[];
  gapMs: number[];
}

/** Cumulative per gap bucket, per class, since the tier opened. */
export class ReuseGaps {
  readonly byClass: Record<string, ReuseGapBuckets> = {};

  note(trafficClass: string, gapMs: number, tokens: number): void {
    let buckets = this.byClass[trafficClass];
    if (buckets === undefined) {
      const zeros = () => new Array<number>(REUSE_GAP_BUCKETS).fill(0);
      buckets = this.byClass[trafficClass] = { tokens: zeros(), blocks: zeros(), gapMs: zeros() };
    }
    const b = reuseGapBucket(gapMs);
    buckets.tokens[b] += tokens;
    buckets.blocks[b]++;
    buckets.gapMs[b] += gapMs;
  }
}
