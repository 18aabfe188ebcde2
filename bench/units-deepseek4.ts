/**
 * Prefix units on deepseek4-small (issue #26; `npm run bench -- units-deepseek4`, also part of `units`):
 * DeepSeek V4 (SWA 128, CSA/HCA compression, indexer), its entry pages as blocks and its windows and
 * unfinished groups in each tail, served with units as the worker does, through the worker's real
 * scheduler and a real KvTier over fs (bench/units.ts's agent loop). Its forward runs ~70 tokens/s
 * on one thread here, so the loop is smaller than lfm2's (DS4_LOOP: a 1024-token shared prompt,
 * 2 agents × 8 turns, cold twins at turns 1, 4 and 7 only) and the import is measured against one
 * cold prefill of DS4_UNIT_P = 4096 tokens:
 *
 *   deepseek4_ttft_cached_over_cold, deepseek4_hit_tokens_over_ideal (as units_* in bench/units.ts)
 *   deepseek4_tail_bytes_per_unit   mean stored tail, next to deepseek4_full_state_bytes_at_p (the
 *                                   whole f32 state at the mean final p: windows, compressor rows,
 *                                   every compressed entry and indexer key)
 *   deepseek4_tail_bytes_at_unit_p, deepseek4_full_state_bytes_at_unit_p, deepseek4_unit_import_over_prefill
 */
import { loadEngine } from '../inference-core/engine/index.ts';
import type { Deepseek4GraphConfig } from '../inference-core/engine/deepseek4-graph.ts';
import { deepseek4StateBytes } from '../inference-core/engine/deepseek4-state.ts';
import { DEFAULT_UNIT_INTERVAL_TOKENS, unitServing } from '../src/scheduler/units.ts';
import { agentLoop, importOverPrefill, median, round, say, type LoopShape } from './units.ts';

const DS4_UNIT_P = 4096;
const DS4_LOOP: LoopShape = { shared: 1024, agents: 2, turns: 8, cold: (t) => t === 1 || t === 4 || t === 7 };

export async function run(): Promise<Record<string, number>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const out: Record<string, number> = {};
  const ds = await loadEngine('synthetic:deepseek4-small', { dataDir, threads: 1, maxBatch: 4 });
  try {
    const cfg = (ds.graphConfig as Deepseek4GraphConfig).cfg;
    const loop = await agentLoop(ds, DEFAULT_UNIT_INTERVAL_TOKENS, true, undefined, DS4_LOOP);
    out.deepseek4_ttft_cached_over_cold = round(median(loop.ttftWarm) / median(loop.ttftCold));
    out.deepseek4_ttft_cached_ms = round(median(loop.ttftWarm), 1);
    out.deepseek4_ttft_cold_ms = round(median(loop.ttftCold), 1);
    out.deepseek4_hit_tokens_over_ideal = round(loop.cached / loop.ideal);
    out.deepseek4_tail_bytes_per_unit = Math.round(loop.tailBytes / loop.tails);
    out.deepseek4_full_state_bytes_at_p = deepseek4StateBytes(cfg, Math.round(loop.meanP));
    out.deepseek4_loop_bytes_written = loop.bytesWritten;
    say(`deepseek4 loop (N=${DEFAULT_UNIT_INTERVAL_TOKENS}): cached ${loop.cached} / ideal ${loop.ideal}, ttft ${out.deepseek4_ttft_cached_ms} ms vs cold ${out.deepseek4_ttft_cold_ms} ms, ${loop.tails} tails of ${out.deepseek4_tail_bytes_per_unit} B`);
    const imp = await importOverPrefill(ds, unitServing(ds).layout, (p) => deepseek4StateBytes(cfg, p), DS4_UNIT_P, 1);
    out.deepseek4_unit_p = DS4_UNIT_P;
    out.deepseek4_tail_bytes_at_unit_p = imp.tailBytes;
    out.deepseek4_full_state_bytes_at_unit_p = imp.fullKv;
    out.deepseek4_unit_import_over_prefill = round(imp.ratio, 4);
    say(`deepseek4 unit at ${DS4_UNIT_P}: tail ${imp.tailBytes} B vs whole state ${imp.fullKv} B, import/prefill ${out.deepseek4_unit_import_over_prefill}`);
  } finally {
    ds.destroy();
  }
  return out;
}
