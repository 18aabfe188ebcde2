/**
 * `npm run bench -- replay`: the shared Mooncake traces through kvtier.
 *
 *   replay_requests_per_s   the conversation trace through the real tier (a segment store,
 *                           `segment:<dir>` on the disk under tmpdir, + the embedded LMDB plane
 *                           as the node index: `nodeIndex: 'plane'`, mode plane_index; without
 *                           that mode, the segment mode's figure), simulated prefill, time
 *                           compressed; replay_segment_requests_per_s: the same store with the
 *                           node's own LMDB index beside the plane (mode segment), and
 *                           replay_plane_index_over_segment their ratio; best of
 *                           KVTIER_BENCH_REPLAY_ROUNDS (default 2) alternating in the same
 *                           command with: replay_baseline_requests_per_s, the fs store writing
 *                           each block through node:fs alone (fsBatchWrites false) and recording
 *                           it in its own index transaction and plane call (recordBatchMax 1);
 *                           replay_fs_batched_requests_per_s, the fs store with record batches and
 *                           native batched file writes (the headline before segments); the ratios
 *                           replay_speedup_vs_baseline and replay_speedup_vs_fs_batched; the same
 *                           with the store on tmpfs (/dev/shm; KVTIER_BENCH_REPLAY_TMPFS=0 skips
 *                           it): replay_tmpfs_*; CPU µs per written block for each run (the
 *                           process's user + system, all threads); KVTIER_BENCH_REPLAY_LIMIT
 *                           replays only the first N requests (default: all 12,031);
 *                           KVTIER_BENCH_REPLAY_MODES=segment,… runs only those modes
 *   hit table               per TTL (1m, 5m, 1h, 24h, none) and trace: hit tokens and
 *                           ratio by the definition (IdealCache with a TTL; the tier equals
 *                           it request by request: test/src/replay/)
 *   whatif_overhead_us_per_hit  the lookup hook's whole work per hit (ReuseGaps.note:
 *                           bucket search and three adds), minus an empty loop measured
 *                           in the same run
 */
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { loadavg, tmpdir } from 'node:os';
import { join } from 'node:path';

import { ReuseGaps } from '../src/kvtier/index.ts';
import { IdealCache, readTrace, runReplay, TierTarget } from '../src/replay/index.ts';

const TTLS: Array<[string, number]> = [['1m', 60_000], ['5m', 300_000], ['1h', 3_600_000], ['24h', 86_400_000], ['none', Number.POSITIVE_INFINITY]];

export async function run(): Promise<Record<string, number | string | boolean>> {
  const out: Record<string, number | string | boolean> = { load_before: loadavg()[0].toFixed(1) };
  const root = process.env.KVTIER_SHARED_TRACES ?? '/work/shared/traces';
  const paths = { conversation: join(root, 'mooncake_conversation_trace.jsonl.gz'), synthetic: join(root, 'mooncake_synthetic_trace.jsonl.gz') };

  // The per-TTL hit table, both traces.
  for (const [name, path] of Object.entries(paths)) {
    const trace = readTrace(path);
    const input = trace.requests.reduce((a, r) => a + r.inputTokens, 0);
    for (const [label, ttl] of TTLS) {
      const cache = new IdealCache(ttl);
      let hit = 0;
      for (const r of trace.requests) hit += cache.serve(r) * trace.blockTokens;
      out[`${name}_hit_tokens_ttl_${label}`] = hit;
      out[`${name}_hit_ratio_ttl_${label}`] = Number((hit / input).toFixed(4));
    }
  }

  // The hook's overhead per hit.
  const gaps = new Float64Array(1 << 20);
  for (let i = 0; i < gaps.length; i++) gaps[i] = Math.exp(Math.random() * Math.log(30 * 86_400_000));
  const classes = ['chat', 'agent'];
  const histogram = new ReuseGaps();
  let sink = 0;
  const rounds = 5;
  let best = Number.POSITIVE_INFINITY;
  let bestEmpty = Number.POSITIVE_INFINITY;
  for (let round = 0; round < rounds; round++) {
    let t = performance.now();
    for (let i = 0; i < gaps.length; i++) histogram.note(classes[i & 1], gaps[i], 64);
    best = Math.min(best, performance.now() - t);
    t = performance.now();
    for (let i = 0; i < gaps.length; i++) sink += gaps[i] > 0 && classes[i & 1].length > 0 ? 1 : 0;
    bestEmpty = Math.min(bestEmpty, performance.now() - t);
  }
  out.whatif_overhead_us_per_hit = Number((((best - bestEmpty) * 1000) / gaps.length).toFixed(4));
  out.whatif_note_us_per_hit_raw = Number(((best * 1000) / gaps.length).toFixed(4));
  if (sink < 0) out.sink = sink;

  // Requests per second through the real tier: the batched paths vs one per block, alternating, on disk and on tmpfs.
  const limit = process.env.KVTIER_BENCH_REPLAY_LIMIT ? Number(process.env.KVTIER_BENCH_REPLAY_LIMIT) : undefined;
  const replayRounds = process.env.KVTIER_BENCH_REPLAY_ROUNDS ? Number(process.env.KVTIER_BENCH_REPLAY_ROUNDS) : 2;
  const trace = readTrace(paths.conversation, { limit });
  const places: Array<[string, string]> = [['disk', tmpdir()]];
  if (existsSync('/dev/shm') && process.env.KVTIER_BENCH_REPLAY_TMPFS !== '0') places.push(['tmpfs', '/dev/shm']);
  const allModes = [
    ['baseline', { recordBatchMax: 1, fsBatchWrites: false }],
    ['fs_batched', { fsBatchWrites: true }],
    ['segment', { segment: true }],
    ['plane_index', { segment: true, nodeIndex: 'plane' }],
  ] as const;
  const only = process.env.KVTIER_BENCH_REPLAY_MODES?.split(',');
  const modes = allModes.filter(([name]) => only === undefined || only.includes(name));
  const bestPerS: Record<string, number> = {};
  for (let round = 0; round < replayRounds; round++) {
    for (const [place, base] of places) {
      for (const [name, tierOptions] of modes) {
        const dataDir = mkdtempSync(join(base, 'kvtier-bench-replay-'));
        const { segment, ...rest } = { segment: false, ...tierOptions };
        const storage = segment ? { storage: `segment:${join(dataDir, 'segments')}` } : {};
        const target = await TierTarget.open({ dataDir, blockTokens: 512, ttlMs: 3650 * 86_400_000, classes: ['chat'], ...rest, ...storage });
        try {
          const cpu = process.cpuUsage();
          const outcome = await runReplay(trace, target, { sampleEveryMs: 0 });
          const used = process.cpuUsage(cpu);
          const blocks = target.tier.stats().blocksWritten;
          const perS = (outcome.total.requests / outcome.wallMs) * 1000;
          const label = `${place}_${name}`;
          bestPerS[label] = Math.max(bestPerS[label] ?? 0, perS);
          out[`replay_${label}_round${round}_requests_per_s`] = Math.round(perS);
          out[`replay_${label}_round${round}_cpu_us_per_block`] = Math.round((used.user + used.system) / blocks);
          out.replay_requests = outcome.total.requests;
          out.replay_blocks_written = blocks;
          if (outcome.total.hitTokens !== outcome.total.idealHitTokens) out.replay_hit_equals_ideal = false;
        } finally {
          await target.close();
          rmSync(dataDir, { recursive: true, force: true });
        }
      }
    }
  }
  out.replay_hit_equals_ideal ??= true;
  for (const [place, prefix] of [['disk', 'replay_'], ['tmpfs', 'replay_tmpfs_']] as const) {
    const best = (name: string) => bestPerS[`${place}_${name}`];
    // The headline: the tier's embedded setup at its fastest (segment store, node index on the plane), else the segment mode.
    const headline = best('plane_index') ?? best('segment');
    if (headline !== undefined) out[`${prefix}requests_per_s`] = Math.round(headline);
    if (best('segment') !== undefined) out[`${prefix}segment_requests_per_s`] = Math.round(best('segment'));
    if (best('plane_index') !== undefined && best('segment') !== undefined) out[`${prefix}plane_index_over_segment`] = Number((best('plane_index') / best('segment')).toFixed(3));
    if (best('baseline') !== undefined) out[`${prefix}baseline_requests_per_s`] = Math.round(best('baseline'));
    if (best('fs_batched') !== undefined) out[`${prefix}fs_batched_requests_per_s`] = Math.round(best('fs_batched'));
    if (best('segment') !== undefined && best('baseline') !== undefined) out[`${prefix}speedup_vs_baseline`] = Number((best('segment') / best('baseline')).toFixed(3));
    if (best('segment') !== undefined && best('fs_batched') !== undefined) out[`${prefix}speedup_vs_fs_batched`] = Number((best('segment') / best('fs_batched')).toFixed(3));
  }
  out.load_after = loadavg()[0].toFixed(1);
  return out;
}
