/**
 * The engine on Q2_K / Q3_K / Q4_K / Q5_K / Q6_K weights against llama.cpp
 * (node-llama-cpp, child process): the llama31 arch variant (d = 256, so
 * every matrix row is whole 256-value super-blocks) with all its matrices
 * requantized to one K-quant type, then the next-token log-probabilities of
 * both after 8 tokens.
 *
 * Both sides quantize activations to int8 per 256 values (Q8_K) and compute
 * exact integer block sums; the scale's rounding differs in the last bit
 * (kvtier multiplies by 1/(amax/127), ggml by −127/max or 127/amax), which
 * can move an activation one step only when x/d sits within an ulp of a
 * half — on this fixed model and prompt it never does, and the two agree to
 * float rounding: measured 5.7e-7 .. 1.6e-6.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { dequantize, loadEngine, quantize, readGguf, writeGguf, GgmlType } from '../../inference-core/index.ts';
import { ensureArchVariantModel } from '../../inference-core/synthetic/arch-variants.ts';
import { llamaLogprobs } from '../helpers/llamacpp.ts';

let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-kquant-engine-'));
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

/** The llama31 variant with every 2-D matrix (rows of whole 256-blocks) as `type`. */
function requantized(type: GgmlType, name: string): { file: string; converted: number } {
  const src = readGguf(ensureArchVariantModel('llama31', { dataDir, weightType: 'q4_k_m' }));
  let converted = 0;
  const tensors = [...src.tensors.values()].map((t) => {
    if (t.dims.length < 2 || t.dims[0]! % 256 !== 0) return { name: t.name, dims: t.dims, type: t.type, data: t.data };
    converted++;
    return { name: t.name, dims: t.dims, type, data: quantize(type, dequantize(t.type, t.data, t.elements)) };
  });
  const file = writeGguf(path.join(dataDir, `llama31-${name}.gguf`), src.metadata, tensors);
  src.close();
  return { file, converted };
}

const TOL = 1e-5; // max |Δ log-probability| allowed (measured ≤ 1.6e-6)
const CASES: [string, GgmlType][] = [
  ['q4_K', GgmlType.Q4_K],
  ['q5_K', GgmlType.Q5_K],
  ['q6_K', GgmlType.Q6_K],
  ['q3_K', GgmlType.Q3_K],
  ['q2_K', GgmlType.Q2_K],
];

describe('engine on K-quant weights vs llama.cpp', () => {
  it.each(CASES)(`%s (ggml type %i): next-token log-probabilities within ${TOL} of llama.cpp, same argmax`, async (name, type) => {
    const { file, converted } = requantized(type, name);
    expect(converted).toBeGreaterThan(0);
    const engine = await loadEngine(file, { dataDir, kvDtype: 'f32', threads: 1 });
    try {
      const tokens = [1, 2, 3, 4, 5, 6, 7, 8];
      const seq = engine.createSequence();
      const logits = seq.prefill(tokens);
      seq.free();
      const max = Math.max(...logits);
      const lse = max + Math.log(logits.reduce((a, v) => a + Math.exp(v - max), 0));
      const ref = await llamaLogprobs({ modelPath: file, tokens, threads: 1, kvType: 'f32' });
      let worst = 0;
      ref.forEach((r, i) => {
        if (r !== null) worst = Math.max(worst, Math.abs(logits[i]! - lse - r));
      });
      expect(worst, `${name}: ${converted} tensors requantized`).toBeLessThan(TOL);
      expect(logits.indexOf(max)).toBe(ref.indexOf(Math.max(...ref.map((v) => v ?? -Infinity))));
    } finally {
      engine.destroy();
    }
  }, 180_000);
});
