/**
 * deepseek4-tiny with F16 and Q8_0 weights, and llama.cpp's own llama-quantize
 * output (test/helpers/llamacpp-quantize.py) from its F32 file as Q4_K_M (a
 * Q4_K / Q5_0 / Q8_0 mix: tiny's 64-wide rows fall back from K-quants) and
 * MXFP4_MOE (routed experts MXFP4, the rest Q8_0), against llama.cpp (f32 KV
 * cache).
 * Our mat-vecs feed each weight the activation ggml's CPU mat-mul feeds it
 * (f16 for F16, Q8_0 blocks for Q8_0 / Q5_0 / MXFP4, Q8_K for K-quants), so one token
 * usually agrees to f32 noise (≤ 1e-6). Not always: an f32 sum that lands
 * one ulp away from ggml's can round one activation to the other f16 neighbour
 * (observed 9e-4 on one F16 first token). Longer prompts drift further: a 1-ulp difference in a sum (f64
 * here, f32 SIMD order there) flips one activation's f16 / Q8_0 rounding, and
 * once such noise flips a discrete choice (the indexer's k-th entry, an
 * expert), the logits move by a few hundredths. Tolerances (absolute log-prob):
 *   F16   5e-3 at 1 token, 2e-2 at 24, 65, 300 and 1100 (observed ≤ 6e-3)
 *   Q8_0, Q4_K_M, MXFP4_MOE  1e-4 at 1 token, 0.5 at 24, 65, 300 and 1100 (observed 0.05–0.35)
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';
import { logSoftmax } from './logit-parity.ts';

const LENGTHS = [1, 24, 65, 300, 1100];
const LOOSE = [1e-4, 0.5, 0.5, 0.5, 0.5];
const TOL: Record<string, readonly number[]> = { f16: [5e-3, 2e-2, 2e-2, 2e-2, 2e-2], q8_0: LOOSE, q4_k_m: LOOSE, mxfp4_moe: LOOSE };
const BINS = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');

/** llama-quantize of the F32 file to llama_ftype `ftype` (15 Q4_K_M, 38 MXFP4_MOE). */
function llamaQuantized(ftype: number, name: string): string {
  const f32 = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  const out = path.join(path.dirname(f32), `llama-quantize-${name}-${path.basename(f32)}`);
  const r = spawnSync('python3', [path.resolve('test/helpers/llamacpp-quantize.py'), BINS, f32, out, String(ftype)], { encoding: 'utf8' });
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  return out;
}

describe('deepseek4 forward against llama.cpp (F16, Q8_0, Q4_K_M and MXFP4 mixes)', () => {
  it('log-probabilities agree within the stated tolerances', async () => {
    const files = [
      ...(['f16', 'q8_0'] as const).map((weightType) => ({ weightType: weightType as string, file: ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType }) })),
      { weightType: 'q4_k_m', file: llamaQuantized(15, 'q4_k_m') },
      { weightType: 'mxfp4_moe', file: llamaQuantized(38, 'mxfp4_moe') },
    ];
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
