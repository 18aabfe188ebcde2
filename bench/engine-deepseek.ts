/**
 * DeepSeek (deepseek2: MLA + MoE) engine benchmark on synthetic:deepseek-small
 * (V3-shaped: d 512, 6 layers with the first dense, 32 routed experts top-4 +
 * 1 shared, kv_lora_rank 128, rope 32; inference-core/synthetic/deepseek-synthetic.ts),
 * ours vs llama.cpp (node-llama-cpp's CPU build) on the same GGUF and prompt,
 * each side at its best thread count (1 or 2), f16 KV on both sides.
 *
 *   deepseek_prefill_tps / deepseek_llamacpp_prefill_tps   PREFILL_TOKENS random tokens
 *   deepseek_decode_tps  / deepseek_llamacpp_decode_tps    DECODE_TOKENS greedy steps after them
 *   deepseek_prefill_ratio, deepseek_decode_ratio           ours / llama.cpp (target ≥ 1.0)
 *   mla_block_bytes            one 64-token block of latent KV (layers · 64 · (kv_lora_rank + rope) · 2)
 *   mla_expanded_block_bytes   the same block with per-head K (nope + rope) and V (f16)
 *   mla_block_ratio            mla / expanded (target ≤ 0.25)
 *   deepseek_import_over_prefill  63 latent blocks (4032 tokens) imported as memory copies /
 *                                 the same tokens prefilled (target ≤ 0.01)
 *
 * KVTIER_BENCH_DEEPSEEK_WEIGHTS: f16, q8_0 (default) or q4_k_m (llama-quantize's mix).
 */
import * as os from 'node:os';
import { loadEngine, resolveModelPath } from '../inference-core/index.ts';
import type { DeepseekConfig } from '../inference-core/deepseek-config.ts';
import { randomTokens as promptOf } from '../test/inference-core/engine-fixtures.ts';
import { bestLlamaCppRates, bestOurRates, comparisonFields, prefillVsImport } from './engine-timing.ts';

const PREFILL_TOKENS = 2048;
const DECODE_TOKENS = 64;
const IMPORT_BLOCKS = 63;
const THREAD_CHOICES = [1, 2].filter((t) => t <= Math.max(1, os.availableParallelism()));

function say(line: string): void {
  process.stderr.write(`bench engine-deepseek: ${line}\n`);
}

const round = (x: number, digits = 2) => Number(x.toFixed(digits));

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const weightType = process.env.KVTIER_BENCH_DEEPSEEK_WEIGHTS ?? 'q8_0';
  if (!['f16', 'q8_0', 'q4_k_m'].includes(weightType)) throw new Error(`KVTIER_BENCH_DEEPSEEK_WEIGHTS: use f16, q8_0 or q4_k_m, got ${weightType}`);
  const spec = `synthetic:deepseek-small:${weightType}`;
  const modelPath = resolveModelPath(spec, { dataDir });
  const poolBytes = 256 * 2 ** 20;
  const result: Record<string, number | string> = { deepseek_model: spec };

  const { ours, vocab } = await bestOurRates(
    modelPath,
    { poolBytes, promptFor: (v) => promptOf(PREFILL_TOKENS, v, 7), decode: DECODE_TOKENS, warmupDecode: 4, threadChoices: THREAD_CHOICES },
    (threads, m) => say(`ours threads=${threads}: prefill ${m.prefillTps.toFixed(1)} tok/s, decode ${m.decodeTps.toFixed(2)} tok/s`),
    (engine, threads) => {
      if (threads !== THREAD_CHOICES[THREAD_CHOICES.length - 1]) return;
      const c = engine.config as unknown as DeepseekConfig;
      result.mla_block_bytes = engine.kvLayout.blockBytes;
      result.mla_expanded_block_bytes = c.nLayers * 64 * c.nHeads * (c.qkNopeDim + c.qkRopeDim + c.vHeadDim) * 2;
      result.mla_block_ratio = round(engine.kvLayout.blockBytes / result.mla_expanded_block_bytes, 4);
    },
  );
  const prompt = promptOf(PREFILL_TOKENS, vocab, 7);
  const ref = await bestLlamaCppRates(modelPath, prompt, DECODE_TOKENS, THREAD_CHOICES, 4, (threads, m) =>
    say(`llama.cpp threads=${threads}: prefill ${m.prefillTps.toFixed(1)} tok/s, decode ${m.decodeTps.toFixed(2)} tok/s`),
  );
  Object.assign(result, comparisonFields('deepseek', ours, ref, round));

  // A 4032-token prefix: imported as 63 latent blocks vs prefilled.
  const engine = await loadEngine(modelPath, { threads: ours.prefillThreads || 1, kvDtype: 'f16', poolBytes });
  try {
    const long = promptOf(IMPORT_BLOCKS * 64, engine.vocabSize, 11);
    const { prefillMs, importMs } = prefillVsImport(engine, long, IMPORT_BLOCKS);
    say(`4032-token prefix: prefill ${prefillMs.toFixed(0)} ms, import ${importMs.toFixed(2)} ms`);
    Object.assign(result, {
      deepseek_prefix_prefill_ms: round(prefillMs, 1),
      deepseek_prefix_import_ms: round(importMs, 3),
      deepseek_import_over_prefill: round(importMs / prefillMs, 5),
    });
  } finally {
    engine.destroy();
  }
  return result;
}
