/**
 * deepseek4-tiny with F16, BF16 and Q8_0 weights, and as Q4_K_M (a Q4_K / Q5_0 /
 * Q8_0 mix: tiny's 64-wide rows fall back from K-quants) and MXFP4_MOE (routed
 * experts MXFP4, the rest Q8_0) — all written by kvtier's synthetic writer, whose
 * files are byte-identical to llama-quantize's from the F32 file
 * (deepseek4-synthetic.test.ts) — against llama.cpp (f32 KV cache).
 * Our mat-vecs feed each weight the activation ggml's CPU mat-mul feeds it
 * (f16 for F16, Q8_0 blocks for Q8_0 / Q5_0 / MXFP4, Q8_K for K-quants), so one token
 * usually agrees to f32 noise (≤ 1e-6). Not always: an f32 sum that lands
 * one ulp away from ggml's can round one activation to the other f16 neighbour
 * (observed 9e-4 on one F16 first token). Longer prompts drift further: a 1-ulp difference in a sum (f64
 * here, f32 SIMD order there) flips one activation's f16 / Q8_0 rounding, and
 * once such noise flips a discrete choice (the indexer's k-th entry, an
 * expert), the logits move by a few hundredths. Tolerances (absolute log-prob):
 *   F16   5e-3 at 1 token, 2e-2 at 24, 65, 300 and 1100 (observed ≤ 6e-3)
 *   BF16  1e-4 at 1 and 24 tokens (observed 5e-7), 0.5 at 65, 300 and 1100 (observed
 *         6.5e-3 and 5.8e-2 at 65 and 300: bf16's coarse rounding flips an indexer/expert choice sooner)
 *   Q8_0, Q4_K_M, MXFP4_MOE  1e-4 at 1 token, 0.5 at 24, 65, 300 and 1100 (observed 0.05–0.35)
 */
import { describe, expect, it } from 'vitest';

import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { logSoftmax } from './logit-parity.ts';

const LENGTHS = [1, 24, 65, 300, 1100];
const LOOSE = [1e-4, 0.5, 0.5, 0.5, 0.5];
const TOL: Record<string, readonly number[]> = { f16: [5e-3, 2e-2, 2e-2, 2e-2, 2e-2], bf16: [1e-4, 1e-4, 0.5, 0.5, 0.5], q8_0: LOOSE, q4_k_m: LOOSE, mxfp4_moe: LOOSE };

describe('deepseek4 forward against llama.cpp (F16, Q8_0, Q4_K_M and MXFP4 mixes)', () => {
  it('log-probabilities agree within the stated tolerances', async () => {
    const files = (['f16', 'bf16', 'q8_0', 'q4_k_m', 'mxfp4_moe'] as const).map((weightType) => ({ weightType: weightType as string, file: ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType }) }));
    const rng = new Xoshiro128(2025);
    const tokens = Array.from({ length: 1100 }, () => rng.nextU32() % 509);
    const res = await llamaBatch(files.map(({ file }) => ({ op: 'logitsMany' as const, modelPath: file, prompts: LENGTHS.map((n) => tokens.slice(0, n)), kvType: 'f32' as const })));
    files.forEach(({ weightType, file }, f) => {
      const m = new Deepseek4Model(file);
      LENGTHS.forEach((n, k) => {
        const ours = logSoftmax(m.eval(m.newState(), tokens.slice(0, n)));
        const ref = res[f]!.logprobs![k]!;
        let d = 0;
        for (let i = 0; i < ref.length; i++) if (ref[i] !== null) d = Math.max(d, Math.abs(ours[i]! - ref[i]!));
        process.stderr.write(`deepseek4 parity ${weightType} ${n} tokens: ${d.toExponential(2)}\n`);
        expect(d, `${weightType} ${n} tokens`).toBeLessThan(TOL[weightType][k]!);
      });
    });
  }, 600_000);
});
