/**
 * Prefix units (issue #26): `npm run bench -- units`.
 *
 * Agent loop on lfm2-tiny (a recurrent hybrid: short convolutions +
 * attention, state outside its pages, served with units), through the
 * worker's real scheduler and a real KvTier over fs in a temp dir:
 * AGENTS agents of one tenant × TURNS turns, each agent's first prompt a
 * SHARED_TOKENS-token shared system + tools prompt (not a multiple of any N,
 * lfm2-tiny's context is 4096, so not the 4k the issue names) plus its own
 * 50-token task; every next prompt = the previous prompt + the whole reply +
 * 40 new tokens (a tool result). Greedy, REPLY_TOKENS per turn.
 *
 *   units_ttft_cached_over_cold     median worker TTFT (lookup + load + prefill to the first token) of turns 2..TURNS over the
 *                                   same prompts sent cold (a fresh tenant each), N = the default
 *   units_hit_tokens_over_ideal     Σ cached tokens / Σ ideal, ideal = DeepSeek's rule over the same
 *                                   requests with no capacity limit: the longest earlier prompt end,
 *                                   reply end or interval position (k·N of an earlier prompt or
 *                                   prompt + reply) that is a prefix of the request (≤ its length − 1)
 *   units_tail_bytes_per_unit       mean stored tail size, next to units_full_kv_bytes_at_p (K|V of
 *                                   every token up to the unit's mean position + the conv state)
 *   units_unit_import_over_prefill  lookup + load + import of a unit at UNIT_P tokens over a cold
 *                                   prefill of the same UNIT_P tokens (median of 5)
 *   units_sweep_<N>_hit_tokens / _ideal_tokens / _bytes_written / _tails
 *                                   the loop again (no cold runs, common-prefix detection off, so the
 *                                   interval alone is measured) with N ∈ {256, 1024, 4096}; bytes are
 *                                   every blob written (blocks and tails)
 *
 * gemma3-tiny (interleaved sliding window 40 and one global layer), served
 * with units as the worker does (unitServing: blocks of the global layer,
 * the sliding layers' window in each tail): the same agent loop
 *   gemma3_ttft_cached_over_cold, gemma3_hit_tokens_over_ideal,
 *   gemma3_tail_bytes_per_unit next to gemma3_full_kv_bytes_at_p (every layer's K|V at the mean final p)
 * and a unit at UNIT_P written and read through the tier:
 *   gemma3_tail_bytes_at_unit_p, gemma3_full_kv_bytes_at_unit_p, gemma3_unit_import_over_prefill
 *
 * deepseek4-small: bench/units-deepseek4.ts (also run by `units`), on the helpers exported here.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { exportUnit, exportUnitTail, importUnit, loadEngine, unitShapeOf, type LoadedEngine } from '../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../inference-core/synthetic/lfm2-synthetic.ts';
import { FsBlobStore } from '../storage-adapters/index.ts';
import { KvTier, type KvLayout } from '../src/kvtier/index.ts';
import { KvTierCache } from '../src/scheduler/cache-adapter.ts';
import type { JobEvent } from '../src/scheduler/job.ts';
import { UnitPolicy, DEFAULT_UNIT_INTERVAL_TOKENS, unitServing } from '../src/scheduler/units.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';
import { engineModel, schedulerJob, startScheduler } from '../test/src/scheduler/scheduler-fixtures.ts';

const SHARED_TOKENS = 3000;
const AGENTS = 3;
const TURNS = 8;
const REPLY_TOKENS = 16;
const UNIT_P = 3900;
const SWEEP = [256, 1024, 4096];
/** The agent loop's size; cold twins only on the turns `cold` names (all when absent). */
export interface LoopShape {
  shared: number;
  agents: number;
  turns: number;
  cold?: (turn: number) => boolean;
}
const LOOP: LoopShape = { shared: SHARED_TOKENS, agents: AGENTS, turns: TURNS };

export const say = (line: string) => process.stderr.write(`bench units: ${line}\n`);
export const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
export const round = (x: number, d = 3) => Number(x.toFixed(d));

interface LoopFigures {
  cached: number;
  ideal: number;
  ttftWarm: number[];
  ttftCold: number[];
  parts: { lookup: number[]; load: number[]; prefill: number[] };
  bytesWritten: number;
  tailBytes: number;
  tails: number;
  meanP: number;
}

async function withTier<T>(layout: KvLayout, run: (tier: KvTier, cache: KvTierCache) => Promise<T>): Promise<T> {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-bench-units-'));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  // the served defaults (hot RAM cache of verified blocks on), the embedded LMDB plane
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: 64, metadataRedisUrl: '' });
  try {
    return await run(tier, await KvTierCache.create(tier, layout));
  } finally {
    await tier.close();
    await store.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

const startsWith = (a: number[], prefix: number[]) => prefix.length <= a.length && prefix.every((t, i) => a[i] === t);

export async function agentLoop(engine: LoadedEngine, interval: number, withCold: boolean, commonPrefixRequests?: number, shape: LoopShape = LOOP): Promise<LoopFigures> {
  // as the worker serves it (engine-thread.ts): the unit's block layout, and its namespace fingerprint
  const serving = unitServing(engine);
  return withTier(serving.layout, async (tier, cache) => {
    const units = new UnitPolicy(serving.port!, cache, { intervalTokens: interval, ...(commonPrefixRequests !== undefined ? { commonPrefixRequests } : {}) });
    const { scheduler, finished } = startScheduler({ engine, cache }, { engine: { ...engineModel(engine), fingerprint: serving.fingerprint }, units, retainSequences: 0 });
    let coldSalt = 0x1000;
    const run = async (id: string, tokens: number[], salt: string) => {
      scheduler.submit(schedulerJob(id, tokens, { tenantSalt: salt }, REPLY_TOKENS));
      const got = await finished(id);
      await tier.flush();
      const p = got.find((e): e is Extract<JobEvent, { type: 'prefilled' }> => e.type === 'prefilled')!;
      // the worker's time to first token: lookup + load + the prefill that ends with the first token's logits
      return { cached: p.cachedTokens, reply: got.flatMap((e) => (e.type === 'tokens' ? e.ids : [])), ttft: p.lookupMs + p.loadMs + p.prefillMs, p };
    };
    const shared = randomTokens(shape.shared, engine.vocabSize, 7);
    const prompts = Array.from({ length: shape.agents }, (_, a) => [...shared, ...randomTokens(50, engine.vocabSize, 100 + a)]);
    const history: number[][] = [];
    const f: LoopFigures = { cached: 0, ideal: 0, ttftWarm: [], ttftCold: [], parts: { lookup: [], load: [], prefill: [] }, bytesWritten: 0, tailBytes: 0, tails: 0, meanP: 0 };
    for (let turn = 0; turn < shape.turns; turn++) {
      for (let a = 0; a < shape.agents; a++) {
        const prompt = prompts[a];
        // the ideal: DeepSeek's rule with no capacity limit over the requests so far
        let ideal = 0;
        for (const h of history) {
          const ends = [h.length];
          if (interval > 0) for (let p = interval; p < h.length; p += interval) ends.push(p);
          for (const p of ends) if (p > ideal && p <= prompt.length - 1 && startsWith(prompt, h.slice(0, p))) ideal = p;
        }
        const r = await run(`a${a}t${turn}`, prompt, 'aa');
        f.cached += r.cached;
        f.ideal += ideal;
        if (turn > 0) {
          f.ttftWarm.push(r.ttft);
          f.parts.lookup.push(r.p.lookupMs);
          f.parts.load.push(r.p.loadMs);
          f.parts.prefill.push(r.p.prefillMs);
        }
        if (withCold && turn > 0 && (shape.cold?.(turn) ?? true)) f.ttftCold.push((await run(`c${a}t${turn}`, prompt, (coldSalt++).toString(16))).ttft);
        history.push(prompt.slice(), [...prompt, ...r.reply]);
        prompts[a] = [...prompt, ...r.reply, ...randomTokens(40, engine.vocabSize, 1000 + turn * 10 + a)];
      }
    }
    await scheduler.close();
    const u = tier.stats().units!;
    f.bytesWritten = tier.stats().bytesWritten;
    f.tailBytes = u.bytesWritten;
    f.tails = u.written;
    f.meanP = prompts.reduce((s, p) => s + p.length, 0) / prompts.length;
    return f;
  });
}

/**
 * Lookup + load + import of a unit at `p` over a cold prefill of `p` tokens (median of `prefills` and of 5
 * imports), its tail's stored size and `fullState(p)` (what storing the whole state would cost).
 */
export async function importOverPrefill(engine: LoadedEngine, blockLayout: KvLayout, fullState: (p: number) => number, unitP: number, prefills = 5): Promise<{ ratio: number; tailBytes: number; fullKv: number }> {
  return withTier(blockLayout, async (tier) => {
    const tokens = randomTokens(unitP + 1, engine.vocabSize, 77);
    const ns = tier.namespace({ modelFingerprint: engine.fingerprint, tenantSalt: 'bb' });
    const scope = { tenant: 't', trafficClass: 'agent' };
    const prefillMs: number[] = [];
    let unit = null as ReturnType<typeof exportUnit> | null;
    let tail = null as ReturnType<typeof exportUnitTail> | null;
    for (let i = 0; i < prefills; i++) {
      const seq = engine.createSequence();
      const t0 = performance.now();
      seq.prefill(tokens.slice(0, unitP));
      prefillMs.push(performance.now() - t0);
      unit ??= exportUnit(engine, seq);
      tail ??= exportUnitTail(engine, seq);
      seq.free();
    }
    const ids = Uint32Array.from(tokens.slice(0, unitP));
    tier.store({ namespace: ns, tokens: ids, payloads: unit!.blocks, layout: blockLayout, ...scope });
    tier.storeUnit({ namespace: ns, tokens: ids, dtype: tail!.dtype, sections: tail!.sections, ...scope });
    await tier.flush();
    const importMs: number[] = [];
    for (let i = 0; i < 5; i++) {
      const t0 = performance.now();
      const hit = await tier.lookupUnit(ns, Uint32Array.from(tokens), scope, unitP);
      const loaded = hit && (await tier.loadUnit(hit));
      if (!loaded || loaded.position !== unitP) throw new Error('bench units: the unit was not found');
      const seq = engine.createSequence();
      importUnit(engine, seq, { position: loaded.position, blocks: loaded.blocks.map((b) => b.payload), tail: loaded.tail.sections });
      importMs.push(performance.now() - t0);
      loaded.release();
      seq.free();
    }
    return { ratio: median(importMs) / median(prefillMs), tailBytes: tier.stats().units!.bytesWritten, fullKv: fullState(unitP) };
  });
}

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const out: Record<string, number | string> = {};
  const lfm2 = await loadEngine(ensureLfm2Model({ dataDir }), { kvDtype: 'f16', threads: 1, poolBytes: 64 * 2 ** 20, maxBatch: 4 });
  try {
    const main = await agentLoop(lfm2, DEFAULT_UNIT_INTERVAL_TOKENS, true);
    const s = unitShapeOf(lfm2);
    const conv = s.conv!.layers.length * s.conv!.rows * s.conv!.width * 4;
    out.units_default_interval_tokens = DEFAULT_UNIT_INTERVAL_TOKENS;
    out.units_ttft_cached_over_cold = round(median(main.ttftWarm) / median(main.ttftCold));
    out.units_ttft_cached_ms = round(median(main.ttftWarm), 1);
    out.units_ttft_cold_ms = round(median(main.ttftCold), 1);
    out.units_hit_tokens_over_ideal = round(main.cached / main.ideal);
    out.units_tail_bytes_per_unit = Math.round(main.tailBytes / main.tails);
    out.units_full_kv_bytes_at_p = Math.round(main.meanP * lfm2.kvBytesPerToken + conv);
    out.units_ttft_cached_lookup_ms = round(median(main.parts.lookup), 2);
    out.units_ttft_cached_load_ms = round(median(main.parts.load), 2);
    out.units_ttft_cached_prefill_ms = round(median(main.parts.prefill), 2);
    say(`lfm2 loop (N=${DEFAULT_UNIT_INTERVAL_TOKENS}): cached ${main.cached} / ideal ${main.ideal}, ttft ${out.units_ttft_cached_ms} ms (lookup ${out.units_ttft_cached_lookup_ms}, load ${out.units_ttft_cached_load_ms}, prefill ${out.units_ttft_cached_prefill_ms}) vs cold ${out.units_ttft_cold_ms} ms, ${main.tails} tails`);
    const imp = await importOverPrefill(lfm2, lfm2.kvLayout, (p) => p * lfm2.kvBytesPerToken + conv, UNIT_P);
    out.units_unit_import_over_prefill = round(imp.ratio, 4);
    out.units_unit_p = UNIT_P;
    out.units_tail_bytes_at_unit_p = imp.tailBytes;
    out.units_full_kv_bytes_at_unit_p = imp.fullKv;
    for (const n of SWEEP) {
      // detection off: what the interval alone covers, against the ideal of the same rule
      const f = await agentLoop(lfm2, n, false, 0);
      out[`units_sweep_${n}_hit_tokens`] = f.cached;
      out[`units_sweep_${n}_ideal_tokens`] = f.ideal;
      out[`units_sweep_${n}_bytes_written`] = f.bytesWritten;
      out[`units_sweep_${n}_tails`] = f.tails;
      say(`sweep N=${n}: hit ${f.cached} tokens, ${f.bytesWritten} bytes written (${f.tails} tails)`);
    }
  } finally {
    lfm2.destroy();
  }
  const gemma = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir }), { kvDtype: 'f16', threads: 1, poolBytes: 64 * 2 ** 20, maxBatch: 4 });
  try {
    // the same agent loop, gemma3 served with units as the worker does (global-layer blocks + window tails)
    const loop = await agentLoop(gemma, DEFAULT_UNIT_INTERVAL_TOKENS, true);
    out.gemma3_ttft_cached_over_cold = round(median(loop.ttftWarm) / median(loop.ttftCold));
    out.gemma3_ttft_cached_ms = round(median(loop.ttftWarm), 1);
    out.gemma3_ttft_cold_ms = round(median(loop.ttftCold), 1);
    out.gemma3_hit_tokens_over_ideal = round(loop.cached / loop.ideal);
    out.gemma3_tail_bytes_per_unit = Math.round(loop.tailBytes / loop.tails);
    // what storing the whole state at p would cost: every layer's K|V of every token (a sliding layer's pages hold them all)
    out.gemma3_full_kv_bytes_at_p = Math.round(loop.meanP * gemma.kvBytesPerToken);
    out.gemma3_loop_bytes_written = loop.bytesWritten;
    say(`gemma3 loop (N=${DEFAULT_UNIT_INTERVAL_TOKENS}): cached ${loop.cached} / ideal ${loop.ideal}, ttft ${out.gemma3_ttft_cached_ms} ms vs cold ${out.gemma3_ttft_cold_ms} ms, ${loop.tails} tails of ${out.gemma3_tail_bytes_per_unit} B`);
    const s = unitShapeOf(gemma);
    const layout: KvLayout = { layers: s.blockLayers.length, kvHeads: s.kvHeads, headDim: s.headDim, dtype: s.dtype, tokensPerBlock: 64 };
    const imp = await importOverPrefill(gemma, layout, (p) => p * gemma.kvBytesPerToken, UNIT_P);
    out.gemma3_tail_bytes_at_unit_p = imp.tailBytes;
    out.gemma3_full_kv_bytes_at_unit_p = imp.fullKv;
    out.gemma3_unit_import_over_prefill = round(imp.ratio, 4);
    say(`gemma3 unit at ${UNIT_P}: tail ${imp.tailBytes} B vs full K|V ${imp.fullKv} B, import/prefill ${out.gemma3_unit_import_over_prefill}`);
  } finally {
    gemma.destroy();
  }
  return out;
}
