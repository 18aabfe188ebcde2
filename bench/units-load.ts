/**
 * Loading a prefix unit from the hot RAM tier against from storage
 * (`npm run bench -- units-load`; also part of `units`). One unit at
 * UNIT_P tokens per model (lfm2-tiny, gemma3-tiny served as the worker serves
 * it), written through a real KvTier over fs, then `lookupUnit` + `loadUnit`
 * timed ROUNDS times in alternation on two tiers of the same content:
 *   storage: hotCacheBytes 0, every block and the tail read from storage (the OS page cache is warm);
 *   hot:     the served default, blocks and tail in the node's hot RAM tier (no storage read).
 *   <model>_unit_load_hot_over_storage   median hot / median storage
 *   <model>_tail_reads_per_hot_load      storage reads of the tail per hot load (0: served from RAM)
 *   <model>_tail_reads_per_4_concurrent  storage reads of the tail when 4 loads of it start at once, hot tier off (1: one flight)
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { exportUnit, loadEngine, unitShapeOf, type LoadedEngine } from '../inference-core/engine/index.ts';
import { ensureGemma3Model } from '../inference-core/synthetic/gemma3-synthetic.ts';
import { ensureLfm2Model } from '../inference-core/synthetic/lfm2-synthetic.ts';
import { FsBlobStore } from '../storage-adapters/index.ts';
import { KvTier, type KvLayout } from '../src/kvtier/index.ts';
import { unitServing } from '../src/scheduler/units.ts';
import { randomTokens } from '../test/inference-core/engine-fixtures.ts';

const UNIT_P = 3900;
const ROUNDS = 15;

const say = (line: string) => process.stderr.write(`bench units-load: ${line}\n`);
const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

async function openTier(hotCacheBytes?: number): Promise<{ tier: KvTier; close: () => Promise<void> }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-bench-units-load-'));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: 64, metadataRedisUrl: '', ...(hotCacheBytes !== undefined ? { hotCacheBytes } : {}) });
  return {
    tier,
    close: async () => {
      await tier.close();
      await store.close();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}

async function measure(engine: LoadedEngine, name: string): Promise<Record<string, number>> {
  const serving = unitServing(engine);
  const layout: KvLayout = serving.layout;
  const tokens = randomTokens(UNIT_P + 1, engine.vocabSize, 77);
  const seq = engine.createSequence();
  seq.prefill(tokens.slice(0, UNIT_P));
  const unit = exportUnit(engine, seq);
  seq.free();
  const s = unitShapeOf(engine);
  const sections = unit.tail.map((t) => ({ ...t, kvHeads: t.kind === 'conv' ? s.conv!.rows : s.kvHeads, headDim: t.kind === 'conv' ? s.conv!.width : s.headDim }));
  const scope = { tenant: 't', trafficClass: 'agent' };
  const ids = Uint32Array.from(tokens.slice(0, UNIT_P));
  const rigs = { storage: await openTier(0), hot: await openTier() };
  try {
    for (const { tier } of Object.values(rigs)) {
      const ns = tier.namespace({ modelFingerprint: serving.fingerprint, tenantSalt: 'bb' });
      tier.store({ namespace: ns, tokens: ids, payloads: unit.blocks, layout, ...scope });
      tier.storeUnit({ namespace: ns, tokens: ids, dtype: s.dtype, sections, ...scope });
      await tier.flush();
    }
    const loadOnce = async (tier: KvTier) => {
      const ns = tier.namespace({ modelFingerprint: serving.fingerprint, tenantSalt: 'bb' });
      const t0 = performance.now();
      const hit = await tier.lookupUnit(ns, Uint32Array.from(tokens), scope, UNIT_P);
      const loaded = hit && (await tier.loadUnit(hit));
      const ms = performance.now() - t0;
      if (!loaded || loaded.position !== UNIT_P) throw new Error(`bench units-load: ${name}'s unit was not found`);
      loaded.release();
      return { ms, hit: hit! };
    };
    const times = { storage: [] as number[], hot: [] as number[] };
    const hotReadsBefore = rigs.hot.tier.stats().units!.tailReads;
    for (let i = 0; i < ROUNDS; i++) {
      times.storage.push((await loadOnce(rigs.storage.tier)).ms);
      times.hot.push((await loadOnce(rigs.hot.tier)).ms);
    }
    const hotReads = rigs.hot.tier.stats().units!.tailReads - hotReadsBefore;
    const { hit } = await loadOnce(rigs.storage.tier);
    const before = rigs.storage.tier.stats().units!.tailReads;
    const loads = await Promise.all(Array.from({ length: 4 }, () => rigs.storage.tier.loadUnit(hit)));
    for (const l of loads) l?.release();
    const concurrentReads = rigs.storage.tier.stats().units!.tailReads - before;
    const out = {
      [`${name}_unit_load_storage_ms`]: Number(median(times.storage).toFixed(3)),
      [`${name}_unit_load_hot_ms`]: Number(median(times.hot).toFixed(3)),
      [`${name}_unit_load_hot_over_storage`]: Number((median(times.hot) / median(times.storage)).toFixed(3)),
      [`${name}_unit_load_blocks`]: Math.floor(UNIT_P / 64),
      [`${name}_tail_reads_per_hot_load`]: hotReads / ROUNDS,
      [`${name}_tail_reads_per_4_concurrent`]: concurrentReads,
    };
    say(`${name} unit at ${UNIT_P}: load ${out[`${name}_unit_load_storage_ms`]} ms from storage, ${out[`${name}_unit_load_hot_ms`]} ms hot; tail reads ${hotReads}/${ROUNDS} hot loads, ${concurrentReads} for 4 concurrent`);
    return out;
  } finally {
    await rigs.storage.close();
    await rigs.hot.close();
  }
}

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const out: Record<string, number | string> = { units_load_unit_p: UNIT_P, units_load_rounds: ROUNDS };
  const lfm2 = await loadEngine(ensureLfm2Model({ dataDir }), { kvDtype: 'f16', threads: 1, poolBytes: 64 * 2 ** 20, maxBatch: 4 });
  try {
    Object.assign(out, await measure(lfm2, 'lfm2'));
  } finally {
    lfm2.destroy();
  }
  const gemma = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir }), { kvDtype: 'f16', threads: 1, poolBytes: 64 * 2 ** 20, maxBatch: 4 });
  try {
    Object.assign(out, await measure(gemma, 'gemma3'));
  } finally {
    gemma.destroy();
  }
  return out;
}
