/**
 * gemma3 against llama.cpp (node-llama-cpp 3.21.1's CPU build) on the same
 * random-weight GGUF (inference-core/synthetic/gemma3-synthetic.ts:
 * interleaved sliding window 40 with the default pattern 6, per-layer rope
 * bases, linear rope scaling on global layers, q/k norms, post-norms, GELU
 * FFN, embedding scale, tied head):
 *   - last-position log-softmax for prompts of 1, 39, 40, 41 (the window's
 *     edge), 65, 200 and 700 tokens within the weight type's tolerance (same
 *     metric as llamacpp-parity.test.ts: max |ours − llama.cpp| over the
 *     vocab / llama.cpp's log-prob spread; f16 1e-3 (measured 3.4e-4 ..
 *     6.2e-4), q8_0 2e-2 (measured 9.1e-3 .. 1.4e-2, see TOLERANCE));
 *   - a 32-token greedy continuation of a 100-token prompt (past the window)
 *     equal up to llama.cpp's first near-tie, teacher-forced argmax after;
 *   - cache equivalence of whole pages (every layer): import + suffix == one pass, bit for bit;
 *   - the check can fail: the same weights declaring no sliding window (every
 *     layer global) miss llama.cpp on the windowed file by > 5× the f16
 *     tolerance at 200 and 700 tokens.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureGemma3Model, GEMMA3_WEIGHT_TYPES, type Gemma3WeightType } from '../../inference-core/synthetic/gemma3-synthetic.ts';
import type { Gemma3Config } from '../../inference-core/gemma3-config.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { itMatchesLlamaCpp, lastLogits, loadParityCases, relError, type ParityCase } from './logit-parity.ts';
import { expectCacheEquivalence } from './cache-equivalence-check.ts';

const TOLERANCE: Record<Gemma3WeightType, { tolerance: number; nearTie: number }> = {
  f16: { tolerance: 1e-3, nearTie: 5e-3 },
  // measured 9.1e-3..1.4e-2 (f16: 3.4e-4..6.2e-4); llama q8_0 files measure ≤ 4e-3 in arch-parity. Not
  // root-caused: both sides quantize activations to Q8_0 per 32 values, and gemma3's post-norms
  // rescale the small attention and FFN outputs to unit size, so what differs there weighs more.
  q8_0: { tolerance: 2e-2, nearTie: 5e-2 },
};
const LENGTHS = [1, 39, 40, 41, 65, 200, 700];

let cases = new Map<Gemma3WeightType, ParityCase>();
let noWindow: LoadedEngine;

beforeAll(async () => {
  const models = GEMMA3_WEIGHT_TYPES.map((weightType): [Gemma3WeightType, string] => [weightType, ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR, weightType })]);
  cases = await loadParityCases(models, { poolBytes: 16 * 2 ** 20, lengths: LENGTHS, promptSeed: 300, greedySeed: 4242 });
  noWindow = await loadEngine(ensureGemma3Model('gemma3-tiny', { dataDir: TEST_DATA_DIR, overrides: { slidingWindow: 0 } }), { kvDtype: 'f16', threads: 1, poolBytes: 16 * 2 ** 20 });
}, 300_000);

afterAll(() => {
  for (const c of cases.values()) c.engine.destroy();
  noWindow?.destroy();
});

describe('gemma3 reads as llama.cpp reads it', () => {
  it('sliding layers by the default pattern 6, window 40, per-layer rope, scale 1/√head_dim', () => {
    const cfg = cases.get('f16')!.engine.config as unknown as Gemma3Config;
    expect(cfg.swaLayers).toEqual([true, true, true, true, true, false, true, true]);
    expect(cfg).toMatchObject({ arch: 'gemma3', slidingWindow: 40, headDim: 32, ropeTheta: 1e6, ropeThetaSwa: 1e4, tiedEmbeddings: true, finalLogitSoftcap: 0 });
    expect(cfg.ropeScaling).toMatchObject({ type: 'linear', factor: 8 });
    expect(cfg.attentionScale).toBe(Math.fround(1 / Math.fround(Math.sqrt(32))));
    expect((noWindow.config as unknown as Gemma3Config).swaLayers.every((s) => !s)).toBe(true);
  });
});

describe.each(GEMMA3_WEIGHT_TYPES)('gemma3-tiny, %s weights', (weightType) => {
  const { tolerance, nearTie } = TOLERANCE[weightType];
  const c = () => cases.get(weightType)!;
  itMatchesLlamaCpp('gemma3', weightType, c, LENGTHS, tolerance, nearTie);
  // The pool keeps every layer's K/V at every position, so whole pages are an exact state
  // (a sliding layer's K/V of token t depends on tokens ≤ t only): the block tier stays exact.
  it.each([
    [1, 37],
    [2, 5],
    [3, 1],
  ])('cache equivalence: k=%i full pages imported + r=%i tokens prefilled == whole prompt, bit for bit', (kb, r) => {
    expectCacheEquivalence(c().engine, kb, r, 9100 + 100 * kb + r, 16);
  });
});

describe('the parity check notices a missing sliding window', () => {
  it.each([5, 6])('all-global attention misses llama.cpp on the windowed file by > 5× the f16 tolerance (prompt %#)', (i) => {
    const k = cases.get('f16')!;
    const err = relError(lastLogits(noWindow, k.prompts[i]), k.ref[i]);
    console.log(`gemma3 without its window, n=${LENGTHS[i]}: relative error ${err.toExponential(2)}`);
    expect(err).toBeGreaterThan(5 * TOLERANCE.f16.tolerance);
  });
});
