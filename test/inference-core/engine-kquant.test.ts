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
import * as path from 'node:path';

import { ensureArchVariantModel } from '../../inference-core/synthetic/arch-variants.ts';
import { describeRequantizedVsLlamaCpp, requantizeMatrices } from './quant-engine-fixtures.ts';

describeRequantizedVsLlamaCpp(
  'engine on K-quant weights vs llama.cpp',
  {
    cases: ['q4_K', 'q5_K', 'q6_K', 'q3_K', 'q2_K'],
    tol: 1e-5, // max |Δ log-probability| allowed (measured ≤ 1.6e-6)
    timeoutMs: 180_000,
    tempPrefix: 'kvtier-kquant-engine-',
  },
  // the llama31 variant with every 2-D matrix (rows of whole 256-blocks) as `type`
  (dataDir, type, name) => requantizeMatrices(ensureArchVariantModel('llama31', { dataDir, weightType: 'q4_k_m' }), type, 256, path.join(dataDir, `llama31-${name}.gguf`)),
);
