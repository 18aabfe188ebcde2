/**
 * The architectures of the files people download, against llama.cpp
 * (node-llama-cpp 3.21.1's CPU build) on the same random-weight GGUFs
 * (inference-core/synthetic/arch-variants.ts: the metadata keys and tensors
 * convert_hf_to_gguf.py writes): Llama 3.1 / 3.2 rope_freqs, linear and YaRN
 * rope scaling (normal and neox), qwen3 q/k norms with key_length ≠
 * n_embd/n_head, tied heads (llama, qwen2), a Mistral-style llama file that
 * declares a sliding window (llama.cpp does not apply it to llama: at 700
 * tokens it agrees with our full attention to 1.2e-4 and is 9.2e-2 off the
 * 16-key-window answer; see the last describe).
 *
 * Per variant × {f16, q8_0, q4_k_m} weights (f16 KV):
 *   - last-position log-softmax for 1-, 65- and 700-token prompts (700 is past
 *     the YaRN variants' original context of 512) within the
 *     dtype's tolerance (same metric as llamacpp-parity.test.ts: max |ours −
 *     llama.cpp| over the vocab / llama.cpp's log-prob spread; f16 1e-3, q8_0
 *     1e-2 as there, measured ≤ 2e-4 and ≤ 4e-3). q4_k_m (llama-quantize's mix,
 *     files 4× wider so K-quant rows are whole 256-blocks) 2e-2: measured
 *     3e-3..1.2e-2 at 65/700 tokens and 2e-7 at 1 token; q8_0 weights at the
 *     same widths measure 4e-3..1e-2 too, so the gap is both sides quantizing
 *     activations (Q8_K / Q8_0) over long prompts, not the K-quant kernels;
 *   - a 32-token greedy continuation equal up to llama.cpp's first near-tie,
 *     then teacher-forced argmax agreement on every step that is not a near-tie;
 *   - cache equivalence: blocks exported from one sequence, imported into a
 *     fresh one plus the suffix prefilled == the whole prompt prefilled, bit
 *     for bit, greedy continuation and exported blocks included.
 * And the checks can fail: the same weights without the rope scaling are
 * compared with llama.cpp on the scaled file and must miss the f16 tolerance
 * by more than 5× (measured at n=700: llama31 1.1e-2, llama32-tied 7.3e-3 —
 * its factors touch only the slowest pairs —, linear 6.2e-2, YaRN 5.9e-2,
 * qwen3 YaRN 1.7e-2; with the scaling 0.7-1.2e-4).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ARCH_VARIANTS, ensureArchVariantModel, type ArchVariant, type ArchVariantWeightType } from '../../inference-core/synthetic/arch-variants.ts';
import { llamaBatch, type LlamaBatchRequest } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR, randomTokens } from './engine-fixtures.ts';
import { itKeepsCacheEquivalence } from './cache-equivalence-check.ts';
import { expectGreedyParity, lastLogits, relError, type ParityCase } from './logit-parity.ts';

const DTYPES: Array<{ weightType: ArchVariantWeightType; tolerance: number; nearTie: number }> = [
  { weightType: 'f16', tolerance: 1e-3, nearTie: 5e-3 },
  { weightType: 'q8_0', tolerance: 1e-2, nearTie: 5e-2 },
  { weightType: 'q4_k_m', tolerance: 2e-2, nearTie: 5e-2 },
];
/** 700 > the YaRN variants' original context (512): positions past it are what YaRN is for. */
const PROMPT_LENGTHS = [1, 65, 700];
const LONGEST = PROMPT_LENGTHS.length - 1;
const GREEDY_TEXT = 'The cache keeps every block of the prompt for days, and the next request';
/** Variants whose scaling a stripped twin can leave out (the rest is structural). */
const SCALED: ArchVariant[] = ['llama31', 'llama32-tied', 'llama-linear', 'llama-yarn', 'qwen3-yarn'];

interface Case extends ParityCase {
  variant: ArchVariant;
  weightType: ArchVariantWeightType;
  tolerance: number;
  nearTie: number;
}

const cases = new Map<string, Case>();
const bare = new Map<ArchVariant, LoadedEngine>();
const keyOf = (v: ArchVariant, w: ArchVariantWeightType) => `${v}/${w}`;

beforeAll(async () => {
  const requests: LlamaBatchRequest[] = [];
  const pending: Array<Omit<Case, 'ref' | 'refGreedy'>> = [];
  for (const variant of ARCH_VARIANTS)
    for (const d of DTYPES) {
      const modelPath = ensureArchVariantModel(variant, { dataDir: TEST_DATA_DIR, weightType: d.weightType });
      const engine = await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 });
      const prompts = PROMPT_LENGTHS.map((n) => randomTokens(n, engine.vocabSize, 100 + n));
      const greedyPrompt = Array.from(engine.tokenizer.encode(GREEDY_TEXT));
      pending.push({ variant, ...d, engine, prompts, greedyPrompt });
      requests.push({ op: 'logitsMany', modelPath, prompts, kvType: 'f16', threads: 1 });
      requests.push({ op: 'greedy', modelPath, tokens: greedyPrompt, nPredict: 32, kvType: 'f16', threads: 1 });
    }
  for (const variant of SCALED) {
    const modelPath = ensureArchVariantModel(variant, { dataDir: TEST_DATA_DIR, weightType: 'f16', withoutRopeScaling: true });
    bare.set(variant, await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 }));
  }
  const results = await llamaBatch(requests);
  pending.forEach((p, i) => {
    const logprobs = results[2 * i].logprobs!;
    const g = results[2 * i + 1];
    cases.set(keyOf(p.variant, p.weightType), { ...p, ref: logprobs, refGreedy: { tokens: g.tokens!, margins: g.margins! } });
  });
}, 300_000);

afterAll(() => {
  for (const c of cases.values()) c.engine.destroy();
  for (const e of bare.values()) e.destroy();
});

describe('arch variants read as llama.cpp reads them', () => {
  const cfg = (v: ArchVariant) => cases.get(keyOf(v, 'f16'))!.engine.config;
  it('llama31 / llama32-tied: rope_freqs.weight, no scaling keys (type defaults to linear, factor 1)', () => {
    for (const v of ['llama31', 'llama32-tied'] as const) {
      expect(cfg(v).ropeFreqFactors).toBe(true);
      expect(cfg(v).ropeScaling).toMatchObject({ type: 'linear', factor: 1 });
      expect(cfg(v).ropeTheta).toBe(500000);
    }
    expect(cfg('llama32-tied').tiedEmbeddings).toBe(true);
  });
  it('linear and YaRN scaling, qwen3 q/k norm and head_dim from key_length, sliding window recorded', () => {
    expect(cfg('llama-linear').ropeScaling).toMatchObject({ type: 'linear', factor: 4 });
    expect(cfg('llama-yarn').ropeScaling).toMatchObject({ type: 'yarn', factor: 4, originalContext: 512 });
    expect(cfg('qwen3-yarn')).toMatchObject({ arch: 'qwen3', ropeType: 'neox', ropeScaling: { type: 'yarn', factor: 4, originalContext: 512 } });
    expect(cfg('qwen3')).toMatchObject({ arch: 'qwen3', qkNorm: true, qkvBias: false, ropeType: 'neox', headDim: 32, dModel: 64, nHeads: 4 });
    expect(cfg('qwen2-tied')).toMatchObject({ arch: 'qwen2', tiedEmbeddings: true, qkvBias: true });
    expect(cfg('mistral-swa').slidingWindow).toBe(16);
  });
});

describe.each(ARCH_VARIANTS.flatMap((variant) => DTYPES.map((d) => ({ variant, ...d }))))(
  '$variant, $weightType weights',
  ({ variant, weightType, tolerance }) => {
    const c = () => cases.get(keyOf(variant, weightType))!;

    it.each(PROMPT_LENGTHS.map((n, i) => [n, i]))(`last-position logits of a %i-token prompt within ${tolerance} of llama.cpp`, (n, i) => {
      const k = c();
      expect(k.ref[i]).toHaveLength(k.engine.vocabSize);
      const err = relError(lastLogits(k.engine, k.prompts[i]), k.ref[i]);
      console.log(`arch parity ${variant}/${weightType} n=${n}: relative error ${err.toExponential(2)} (tolerance ${tolerance})`);
      expect(err).toBeLessThan(tolerance);
    });

    it('greedy 32 tokens equal up to llama.cpp’s first near-tie, teacher-forced argmax after', () => {
      const k = c();
      expectGreedyParity(k.engine, k.greedyPrompt, k.refGreedy, k.nearTie, `arch greedy ${variant}/${weightType}`);
    });

    itKeepsCacheEquivalence(() => c().engine);
  },
);

describe('the parity checks notice a missing rope scaling', () => {
  it.each(SCALED)('%s: the same weights without the scaling miss llama.cpp on the scaled file by > 5× the f16 tolerance', (variant) => {
    const k = cases.get(keyOf(variant, 'f16'))!;
    const engine = bare.get(variant)!;
    expect(engine.config.ropeFreqFactors).toBe(false);
    const i = LONGEST;
    const err = relError(lastLogits(engine, k.prompts[i]), k.ref[i]);
    console.log(`arch parity ${variant} without its scaling, n=${PROMPT_LENGTHS[LONGEST]}: relative error ${err.toExponential(2)}`);
    expect(err).toBeGreaterThan(5 * k.tolerance);
  });
});

describe('llama.cpp does not apply a llama file\'s sliding window', () => {
  it('mistral-swa: attention windowed to 16 keys would be far from llama.cpp, full attention is within tolerance', () => {
    // With a 16-key window, two layers see at most the last 31 tokens, so the
    // last 32 tokens alone give the windowed answer (rope is relative).
    const k = cases.get(keyOf('mistral-swa', 'f16'))!;
    const i = LONGEST;
    const full = relError(lastLogits(k.engine, k.prompts[i]), k.ref[i]);
    const windowed = relError(lastLogits(k.engine, k.prompts[i].slice(-32)), k.ref[i]);
    console.log(`mistral-swa n=${PROMPT_LENGTHS[LONGEST]} vs llama.cpp: full attention ${full.toExponential(2)}, 16-key window ${windowed.toExponential(2)}`);
    expect(full).toBeLessThan(k.tolerance);
    expect(windowed).toBeGreaterThan(10 * k.tolerance);
  });
});
