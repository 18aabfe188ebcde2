/**
 * kvtier's deepseek4 forward (inference-core/engine/deepseek4-*.ts) against
 * llama.cpp (node-llama-cpp 3.21.1, CPU, f32 KV cache) on the random-weight
 * synthetic deepseek4-tiny, F32 weights:
 *
 *   - last-position log-probabilities at 1, 65, 300 and 1100 tokens — past the
 *     SWA window (16), over many CSA groups (4) with the indexer choosing 8 of up
 *     to 275 entries, and over 8 HCA groups (128) — agree within 1e-4 absolute
 *     (observed ≈ 6e-6: f32 vs f64 sums);
 *   - 32 greedy tokens equal llama.cpp's (a step whose top-2 margin in llama.cpp
 *     is under 1e-3 would be a near-tie; none occurs on this prompt);
 *   - switching off any one of hyper-connections, compression, the indexer or
 *     SWA moves the logits by far more than the tolerance, so the check sees each;
 *   - only the chosen experts and the indexer's top-k compressed entries are
 *     computed (work counters).
 */
import { beforeAll, describe, expect, it } from 'vitest';

import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { logSoftmax } from './logit-parity.ts';

const LENGTHS = [1, 65, 300, 1100];
const TOL = 1e-4;

function prompt(n: number, nVocab: number): number[] {
  const rng = new Xoshiro128(2025);
  return Array.from({ length: n }, () => rng.nextU32() % (nVocab - 3));
}

function maxAbsDiff(ours: Float64Array, ref: (number | null)[]): number {
  let m = 0;
  for (let i = 0; i < ref.length; i++) if (ref[i] !== null) m = Math.max(m, Math.abs(ours[i]! - ref[i]!));
  return m;
}

let file: string;
let model: Deepseek4Model;
let tokens: number[];
let ref: (number | null)[][];
let greedyRef: { tokens: number[]; margins: number[] };

beforeAll(async () => {
  file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  model = new Deepseek4Model(file);
  tokens = prompt(Math.max(...LENGTHS), model.cfg.nVocab);
  const res = await llamaBatch([
    { op: 'logitsMany', modelPath: file, prompts: LENGTHS.map((n) => tokens.slice(0, n)), kvType: 'f32' },
    { op: 'greedy', modelPath: file, tokens: tokens.slice(0, 40), nPredict: 32, kvType: 'f32' },
  ]);
  ref = res[0]!.logprobs!;
  greedyRef = { tokens: res[1]!.tokens!, margins: res[1]!.margins! };
}, 600_000);

describe('deepseek4 forward against llama.cpp (F32)', () => {
  it('log-probabilities at 1, 65, 300 and 1100 tokens agree within 1e-4', () => {
    LENGTHS.forEach((n, k) => {
      const ours = logSoftmax(model.eval(model.newState(), tokens.slice(0, n)));
      expect(maxAbsDiff(ours, ref[k]!), `${n} tokens`).toBeLessThan(TOL);
    });
  }, 300_000);

  it('32 greedy tokens equal llama.cpp\'s', () => {
    expect(Math.min(...greedyRef.margins)).toBeGreaterThan(1e-3);
    const st = model.newState();
    let logits = model.eval(st, tokens.slice(0, 40));
    const out: number[] = [];
    for (let i = 0; i < 32; i++) {
      let best = 0;
      for (let j = 1; j < logits.length; j++) if (logits[j]! > logits[best]!) best = j;
      out.push(best);
      logits = model.step(st, best);
    }
    expect(out).toEqual(greedyRef.tokens);
  }, 300_000);

  it('the check fails when any one of hyper-connections, compression, the indexer or SWA is switched off', () => {
    const n = 300;
    const k = LENGTHS.indexOf(n);
    for (const ablation of [{ noHyperConnections: true }, { noCompression: true }, { noIndexer: true }, { noSwa: true }]) {
      const m = new Deepseek4Model(file, ablation);
      const d = maxAbsDiff(logSoftmax(m.eval(m.newState(), tokens.slice(0, n))), ref[k]!);
      expect(d, JSON.stringify(ablation)).toBeGreaterThan(100 * TOL);
    }
  }, 300_000);

  it('computes only the chosen experts and the indexer\'s top-k compressed entries', () => {
    const m = new Deepseek4Model(file);
    const n = 300;
    m.eval(m.newState(), tokens.slice(0, n));
    const c = m.cfg;
    expect(m.stats.expertsComputed).toBe(n * c.nLayer * c.nExpertUsed);
    // per CSA layer and token at most top-k entries; HCA layers attend to all of theirs (≤ 2 here)
    const csaLayers = c.ratios.slice(0, c.nLayer).filter((r) => r === 4).length;
    const hcaLayers = c.ratios.slice(0, c.nLayer).filter((r) => r === 128).length;
    let hcaAll = 0;
    let csaAll = 0;
    for (let p = 0; p < n; p++) {
      hcaAll += Math.floor((p + 1) / 128);
      csaAll += Math.floor((p + 1) / 4);
    }
    expect(m.stats.compressedAvailable).toBe(hcaLayers * hcaAll + csaLayers * csaAll);
    expect(m.stats.compressedAttended).toBeLessThanOrEqual(hcaLayers * hcaAll + csaLayers * n * c.indexerTopK);
    expect(m.stats.compressedAttended).toBeLessThan(m.stats.compressedAvailable / 4);
  }, 300_000);
});
