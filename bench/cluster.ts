/**
 * `npm run bench -- cluster`: the agent workload through `kvtier serve`
 * (REDIS_URL, BullMQ) and `kvtier worker` processes on one shared fs block
 * dir and a real redis-server; model synthetic:small (KVTIER_BENCH_CLUSTER_MODEL),
 * 1 engine thread per worker, each cluster on a fresh store so every run sees
 * the same misses.
 *
 * Workload: 8 agent sessions run at once, each 3 turns in order (a long
 * per-session system prompt, tool-result-like user turns, 24-token replies),
 * after a warm-up pass on other sessions (JIT, pools, connections).
 *   rps_N               requests/s of the whole workload with N workers (default dispatch: aware)
 *   hit_ratio_of_ideal  (3 workers) cached prompt tokens ÷ the full blocks of the previous turn's prompt
 *   ttft_aware_over_roundrobin, ttft_aware_over_roundrobin_s3 (+ _min, _max, _rounds)
 *                       the routing figure, on the fs store and on the S3 store (a real Ceph RGW on
 *                       loopback), 2 workers (one per core here), a hot RAM tier per worker sized to
 *                       1.5 × its share of the sessions' blocks (a RAM miss costs a storage read).
 *                       Both modes run at once in one cluster per round (bench/cluster-pair.ts): an API
 *                       process with KVTIER_DISPATCH=aware and one with =roundrobin (each job to the next
 *                       live worker) in front of the same workers and store, the 8 sessions dealt to them
 *                       in turn, so each round's two samples see the same load. Per round, the mean
 *                       cached-turn (turns ≥ 2) TTFT of aware ÷ of round-robin; the median over
 *                       KVTIER_BENCH_CLUSTER_PAIR_ROUNDS (4) rounds, fs and S3 clusters interleaved. The
 *                       mean, not the p50: with 2 workers round-robin sends a session's next turn back to
 *                       the worker that ran its previous one about half the time (a free hit on its
 *                       retained sequence), so its TTFTs are two clusters of about equal weight and their
 *                       p50 lands in one or the other by chance. _p50_ figures are kept.
 *   ttft_cached_p50_ms_shared_queue
 *                       (KVTIER_BENCH_CLUSTER_PARTS=…,shared_queue) a third API process in the fs clusters,
 *                       KVTIER_DISPATCH=shared (BullMQ's first free worker)
 *   ttft_cached_p50_ms_split, ttft_cached_p50_ms_split_always
 *                       the same with 1 KVTIER_ROLE=prefill + 1 KVTIER_ROLE=decode worker
 * Knobs: KVTIER_BENCH_CLUSTER_MODEL, KVTIER_BENCH_CLUSTER_REPLY_TOKENS,
 * KVTIER_BENCH_CLUSTER_PARTS (comma list of rps,pair,pair_s3,split,shared_queue; default all but
 * shared_queue, which adds that mode to the fs pair's rounds),
 * KVTIER_BENCH_CLUSTER_PAIR_ROUNDS (default 4), KVTIER_BENCH_CLUSTER_PAIR_PASSES (measured passes per
 * cluster on fresh sessions, default 1).
 */
import { availableParallelism } from 'node:os';

import { startCephS3 } from '../test/helpers/ceph-s3.ts';

import { BLOCK, hotBytesPerBlock, MODEL, p50, REPLY_TOKENS, SESSIONS, TURNS, withCluster, workload, type ClusterSpec } from './cluster-harness.ts';
import { pairRounds, type PairMode, type PairStore } from './cluster-pair.ts';

const PARTS = new Set((process.env.KVTIER_BENCH_CLUSTER_PARTS ?? 'rps,pair,pair_s3,split').split(',').map((p) => p.trim()));
const PAIR_ROUNDS = Number(process.env.KVTIER_BENCH_CLUSTER_PAIR_ROUNDS ?? 4);
const PAIR_PASSES = Number(process.env.KVTIER_BENCH_CLUSTER_PAIR_PASSES ?? 1);

const cachedTurnTtft = (turns: Array<{ turn: number; ttftMs: number }>): number => Number(p50(turns.filter((t) => t.turn > 0).map((t) => t.ttftMs)).toFixed(1));

export async function run(): Promise<Record<string, number | string>> {
  const result: Record<string, number | string> = { cores: availableParallelism(), cluster_model: MODEL, cluster_dispatch: 'aware (default) for rps_N' };
  /** Full blocks of each measured session's last turn (prompt + reply): what the sessions keep hot. */
  let sessionBlocks = 0;
  let blockBytes: number | null = null;
  // The pair and split runs size the hot tier from the 1-worker run's sessions and block bytes.
  const counts = PARTS.has('rps') ? [1, 2, 3] : PARTS.has('pair') || PARTS.has('pair_s3') || PARTS.has('split') ? [1] : [];
  for (const n of counts) {
    const measured = await withCluster({ workers: Array.from({ length: n }, () => ({})) }, async ([url], redisUrl) => {
      // Sizing alone (no rps figure) needs no warm-up: prompt lengths and block bytes do not depend on it.
      if (PARTS.has('rps')) await workload(() => url, 1000);
      const out = await workload(() => url, 0);
      // The heartbeat (2 s) carries the hot tier's stats.
      await new Promise((r) => setTimeout(r, 2500));
      blockBytes ??= await hotBytesPerBlock(redisUrl);
      return out;
    });
    if (PARTS.has('rps')) {
      result[`rps_${n}`] = Number(((SESSIONS * TURNS) / measured.seconds).toFixed(2));
      console.error(`[bench cluster] ${n} worker(s): ${result[`rps_${n}`]} req/s`);
    }
    sessionBlocks = measured.turns.filter((t) => t.turn === TURNS - 1).reduce((sum, t) => sum + Math.floor((t.promptTokens + REPLY_TOKENS) / BLOCK), 0);
    if (n === 3) {
      let cached = 0;
      let ideal = 0;
      const byKey = new Map(measured.turns.map((t) => [`${t.session}/${t.turn}`, t]));
      for (const t of measured.turns) {
        if (t.turn === 0) continue;
        const previous = byKey.get(`${t.session}/${t.turn - 1}`)!;
        ideal += Math.floor(previous.promptTokens / BLOCK) * BLOCK;
        cached += Math.min(t.cachedTokens, Math.floor(previous.promptTokens / BLOCK) * BLOCK);
      }
      result.hit_ratio_of_ideal = Number((cached / ideal).toFixed(3));
      result.ttft_cached_p50_ms_3_workers_aware_big_hot_tier = cachedTurnTtft(measured.turns);
    }
  }
  if (result.rps_1 && result.rps_2) result.rps_2_over_rps_1 = Number(((result.rps_2 as number) / (result.rps_1 as number)).toFixed(2));
  if (result.rps_1 && result.rps_3) result.rps_3_over_rps_1 = Number(((result.rps_3 as number) / (result.rps_1 as number)).toFixed(2));

  if (PARTS.has('pair') || PARTS.has('pair_s3') || PARTS.has('split')) {
    if (!blockBytes || sessionBlocks === 0) throw new Error('no hot-tier block size measured (the rps pass reads it from the workers stats)');
    const workerCount = 2;
    // The pair's modes share the workers, so each worker's tier is sized for its share of all 8 sessions, as before.
    const hotBlocks = Math.ceil((1.5 * sessionBlocks) / workerCount);
    const hotBytes = String(Math.ceil(hotBlocks * blockBytes));
    result.pair_workers = workerCount;
    result.pair_hot_tier_blocks_per_worker = hotBlocks;
    result.pair_session_blocks = sessionBlocks;
    const stores = [...(PARTS.has('pair') ? ['fs'] : []), ...(PARTS.has('pair_s3') ? ['s3'] : [])] as PairStore[];
    if (stores.length > 0) {
      const s3 = stores.includes('s3') ? await startCephS3({ log: (line) => console.error(`[bench cluster] ${line}`) }) : undefined;
      try {
        // shared_queue is an fs-only reference (KVTIER_BENCH_CLUSTER_PARTS=…,shared_queue): a third API process in the same clusters.
        const fsModes: PairMode[] = PARTS.has('shared_queue') ? ['aware', 'roundrobin', 'shared_queue'] : ['aware', 'roundrobin'];
        Object.assign(
          result,
          await pairRounds({ rounds: PAIR_ROUNDS, stores, fsModes, passes: PAIR_PASSES, hotBytes, s3, log: (line) => console.error(`[bench cluster] ${line}`) }),
        );
        result.pair_passes = PAIR_PASSES;
      } finally {
        await s3?.stop();
      }
    }
    if (PARTS.has('split')) {
      /** Cached turns' TTFTs of the measured pass (after a warm-up pass on other sessions). */
      const cachedTtfts = async (spec: ClusterSpec): Promise<number[]> =>
        withCluster({ ...spec, worker: { KVTIER_HOT_CACHE_BYTES: hotBytes, ...spec.worker } }, async ([url]) => {
          await workload(() => url, 1000);
          return (await workload(() => url, 0)).turns.filter((t) => t.turn > 0).map((t) => t.ttftMs);
        });
      const median = (values: number[]): number => Number(p50(values).toFixed(1));
      // The decode worker holds every running sequence (the colocated pair holds them in two
      // workers of 4 slots each): with 4 slots, half the sessions' decode halves would queue
      // behind whole replies.
      const splitWorkers: Array<Record<string, string>> = [{ KVTIER_ROLE: 'prefill' }, { KVTIER_ROLE: 'decode', KVTIER_WORKER_CONCURRENCY: String(SESSIONS) }];
      // `always`: every cached turn as two halves; the default splits only a prompt with 256+ uncached tokens.
      result.ttft_cached_p50_ms_split_always = median(await cachedTtfts({ workers: splitWorkers, apis: [{ KVTIER_DISPATCH: 'aware', KVTIER_SPLIT_MIN_PREFILL_TOKENS: '0' }] }));
      console.error(`[bench cluster] split, always two halves (1 prefill + 1 decode): ${result.ttft_cached_p50_ms_split_always} ms`);
      result.ttft_cached_p50_ms_split = median(await cachedTtfts({ workers: splitWorkers, apis: [{ KVTIER_DISPATCH: 'aware' }] }));
      console.error(`[bench cluster] split, conditional (default KVTIER_SPLIT_MIN_PREFILL_TOKENS): ${result.ttft_cached_p50_ms_split} ms`);
    }
  }
  return result;
}
