/**
 * The engine on Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS weights against
 * llama.cpp (node-llama-cpp, child process): synthetic:tiny's f32 matrices
 * requantized to one type (every matrix whose rows are whole blocks; the rest
 * stay f32), then the next-token log-probabilities of both after 8 tokens.
 *
 * kvtier quantizes activations as ggml does for these weights (int8 per 32
 * with an f16 scale, q8_1's s for Q4_1/Q5_1, Q8_K per 256 for IQ4_XS:
 * native/src/ops/matmul-legacy.h), so every block term equals llama.cpp's and
 * the results agree to float rounding: measured 5.6e-7 .. 1.1e-6 (before
 * the ggml-style activation scales: q4_0 1.5e-2, iq4_xs 7.0e-2).
 */
import * as path from 'node:path';

import { ensureSyntheticModel, SUPPORTED_GGML_TYPES, type GgmlType } from '../../inference-core/index.ts';
import { ensureArchVariantModel } from '../../inference-core/synthetic/arch-variants.ts';
import { describeRequantizedVsLlamaCpp, requantizeMatrices } from './quant-engine-fixtures.ts';

/**
 * A synthetic model with its matrices as `type` (every matrix whose rows are
 * whole blocks; the rest keep their type): synthetic:tiny (f32, d=64) for the
 * 32-value types; for IQ4_XS (256-value blocks) the llama31 arch variant
 * 4× wide (d=256, generated as q4_k_m, dequantized and requantized).
 */
function requantized(dataDir: string, type: GgmlType, name: string): { file: string; converted: number } {
  const block = SUPPORTED_GGML_TYPES.get(type)!.blockElems;
  const source = block === 256
    ? ensureArchVariantModel('llama31', { dataDir, weightType: 'q4_k_m' })
    : ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null });
  return requantizeMatrices(source, type, block, path.join(dataDir, `tiny-${name}.gguf`));
}

describeRequantizedVsLlamaCpp(
  'engine on legacy-quant weights vs llama.cpp',
  {
    cases: ['q4_0', 'q4_1', 'q5_0', 'q5_1', 'iq4_nl', 'iq4_xs'],
    tol: 1e-5, // max |Δ log-probability| allowed (measured ≤ 1.1e-6)
    timeoutMs: 120_000,
    tempPrefix: 'kvtier-legacy-engine-',
  },
  requantized,
);
