/**
 * The routing figure with both dispatch modes at once: one cluster per round
 * and store, with one API process per mode (KVTIER_DISPATCH=aware, =roundrobin,
 * optionally =shared) on the same Redis, the same 2 workers and the same block
 * store. The measured sessions are dealt to the modes in turn (session s to
 * mode (s + round) mod modes), all run at once, so every mode's turns
 * interleave in time with the others' and see the same background load; the
 * per-round ratio compares two samples taken side by side, not two clusters
 * minutes apart.
 *
 *   8 sessions ─┬─ even ─▶ API aware      ─┐
 *               └─ odd  ─▶ API roundrobin ─┴─▶ Redis ─▶ worker A, worker B ─▶ one fs dir | one S3 prefix
 *   (round r+1 deals the other way round)
 *
 * What the modes share, by design: the workers' cores, engine slots, job
 * queues, hot tiers and retained-sequence lists, and the store. What they do
 * not: prefixes. Every session has its own system prompt (its number is in
 * the first block), so no session, of either mode, can hit a block another
 * wrote; `first_turn_cached_tokens` checks it (0, else the run fails).
 */
import type { CephS3 } from '../test/helpers/ceph-s3.ts';

import { mean, median, p50, SESSIONS, withCluster, workload, type Turn } from './cluster-harness.ts';

export type PairMode = 'aware' | 'roundrobin' | 'shared_queue';
export type PairStore = 'fs' | 's3';

export interface PairRoundsOptions {
  rounds: number;
  stores: PairStore[];
  /** Modes in the fs clusters (S3 runs the pair only). */
  fsModes: PairMode[];
  /** Measured passes per cluster, each on fresh sessions (more cached turns per mode and round). */
  passes: number;
  /** KVTIER_HOT_CACHE_BYTES for every worker. */
  hotBytes: string;
  s3?: CephS3;
  log: (line: string) => void;
}

const DISPATCH: Record<PairMode, string> = { aware: 'aware', roundrobin: 'roundrobin', shared_queue: 'shared' };

/** Cached-turn TTFTs (turns ≥ 2) per mode of one cluster, and the prompt tokens first turns found cached (must be 0). */
async function pairedCluster(
  modes: PairMode[],
  round: number,
  options: PairRoundsOptions,
  s3: CephS3 | undefined,
): Promise<{ ttfts: Map<PairMode, number[]>; firstTurnCached: number }> {
  const modeOf = (session: number): PairMode => modes[(session + round) % modes.length];
  return withCluster({ workers: [{}, {}], apis: modes.map((m) => ({ KVTIER_DISPATCH: DISPATCH[m] })), worker: { KVTIER_HOT_CACHE_BYTES: options.hotBytes }, s3 }, async (urls) => {
    const urlOf = (session: number): string => urls[modes.indexOf(modeOf(session))];
    // Warm-up on other sessions through every API process (JIT, pools, connections).
    await workload(urlOf, 1000);
    const measured: Turn[] = [];
    for (let pass = 0; pass < options.passes; pass++) measured.push(...(await workload(urlOf, pass * 100)).turns);
    const ttfts = new Map(modes.map((m) => [m, measured.filter((t) => t.turn > 0 && modeOf(t.session) === m).map((t) => t.ttftMs)]));
    const firstTurnCached = measured.filter((t) => t.turn === 0).reduce((sum, t) => sum + t.cachedTokens, 0);
    return { ttfts, firstTurnCached };
  });
}

/**
 * Per store: per round, mean cached-turn TTFT of aware ÷ of round-robin (both measured in the same
 * cluster at the same time); the median over rounds and the spread (min, max, every round's ratio).
 */
export async function pairRounds(options: PairRoundsOptions): Promise<Record<string, number | string>> {
  const result: Record<string, number | string> = {};
  const runs = new Map<string, number[][]>();
  let firstTurnCached = 0;
  for (let round = 0; round < options.rounds; round++) {
    // Stores take turns too (order reversed every other round).
    const stores = round % 2 === 1 ? [...options.stores].reverse() : options.stores;
    for (const store of stores) {
      const modes: PairMode[] = store === 'fs' ? options.fsModes : ['aware', 'roundrobin'];
      const started = performance.now();
      const cluster = await pairedCluster(modes, round, options, store === 's3' ? options.s3 : undefined);
      firstTurnCached += cluster.firstTurnCached;
      const parts: string[] = [];
      for (const mode of modes) {
        const values = cluster.ttfts.get(mode)!;
        const key = `${store}/${mode}`;
        runs.set(key, [...(runs.get(key) ?? []), values]);
        parts.push(`${mode} mean ${mean(values).toFixed(1)} p50 ${p50(values).toFixed(1)} (sorted: ${[...values].sort((x, y) => x - y).map((v) => v.toFixed(0)).join(' ')})`);
      }
      const ratio = mean(cluster.ttfts.get('aware')!) / mean(cluster.ttfts.get('roundrobin')!);
      options.log(`round ${round + 1} ${store} (${((performance.now() - started) / 1000).toFixed(0)} s, aware/rr ${ratio.toFixed(3)}): ${parts.join('; ')}`);
    }
  }
  if (firstTurnCached > 0) throw new Error(`first turns found ${firstTurnCached} cached prompt tokens: some session hit another's prefix, the modes are not independent`);
  result.first_turn_cached_tokens = firstTurnCached;
  for (const store of options.stores) {
    const suffix = store === 's3' ? '_s3' : '';
    const aware = runs.get(`${store}/aware`)!;
    const roundrobin = runs.get(`${store}/roundrobin`)!;
    const perRound = aware.map((values, r) => mean(values) / mean(roundrobin[r]));
    const round3 = (x: number): number => Number(x.toFixed(3));
    result[`ttft_aware_over_roundrobin${suffix}`] = round3(median(perRound));
    result[`ttft_aware_over_roundrobin${suffix}_min`] = round3(Math.min(...perRound));
    result[`ttft_aware_over_roundrobin${suffix}_max`] = round3(Math.max(...perRound));
    result[`ttft_aware_over_roundrobin${suffix}_rounds`] = perRound.map((r) => r.toFixed(3)).join(' ');
    result[`ttft_cached_mean_ms_aware${suffix}`] = Number(mean(aware.flat()).toFixed(1));
    result[`ttft_cached_mean_ms_roundrobin${suffix}`] = Number(mean(roundrobin.flat()).toFixed(1));
    result[`ttft_cached_p50_ms_aware${suffix}`] = Number(p50(aware.flat()).toFixed(1));
    result[`ttft_cached_p50_ms_roundrobin${suffix}`] = Number(p50(roundrobin.flat()).toFixed(1));
    result[`ttft_aware_over_roundrobin${suffix}_p50_pooled`] = round3(p50(aware.flat()) / p50(roundrobin.flat()));
    result[`cached_turns_per_mode_round${suffix}`] = aware[0].length;
    if (runs.has(`${store}/shared_queue`)) result.ttft_cached_p50_ms_shared_queue = Number(p50(runs.get(`${store}/shared_queue`)!.flat()).toFixed(1));
  }
  result.pair_rounds = options.rounds;
  result.pair_sessions_per_cluster = SESSIONS;
  return result;
}
