/**
 * deepseek4-tiny with F16 and Q8_0 weights against llama.cpp (f32 KV cache).
 * Our mat-vecs feed each weight the activation ggml's CPU mat-mul feeds it
 * (rounded to f16 for F16, quantized to Q8_0 blocks for Q8_0), so one token
 * agrees to f32 noise. Longer prompts drift: a 1-ulp difference in a sum (f64
 * here, f32 SIMD order there) flips one activation's f16 / Q8_0 rounding, and
 * once such noise flips a discrete choice (the indexer's k-th entry, an
 * expert), the logits move by a few hundredths. Tolerances (absolute log-prob):
 *   F16   1e-4 at 1 token, 2e-2 at 24, 65, 300 and 1100 (observed ≤ 6e-3)
 *   Q8_0  1e-4 at 1 token, 0.5 at 24, 65, 300 and 1100 (observed 0.05–0.35)
 */
import { describe, expect, it } from 'vitest';

import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { logSoftmax } from './logit-parity.ts';

const LENGTHS = [1, 24, 65, 300, 1100];
const TOL = { f16: [1e-4, 2e-2, 2e-2, 2e-2, 2e-2], q8_0: [1e-4, 0.5, 0.5, 0.5, 0.5] } as const;

describe('deepseek4 forward against llama.cpp (F16, Q8_0)', () => {
  it('log-probabilities agree within the stated tolerances', async () => {
    const files = (['f16', 'q8_0'] as const).map((weightType) => ({ weightType, file: ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType }) }));
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
        expect(d, `${weightType} ${n} tokens`).toBeLessThan(TOL[weightType][k]!);
      });
    });
  }, 600_000);
});
