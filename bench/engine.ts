/**
 * Engine benchmark: our engine vs llama.cpp (node-llama-cpp's CPU build, same
 * GGUF file, same prompt) on synthetic:small in F16, Q8_0 and Q4_K_M weights
 * (q4_k_m: llama-quantize's tensor mix — Q4_K, Q6_K for attn_v/ffn_down on
 * some layers and for the tied token_embd/LM head).
 *
 *   <w>_prefill_tps / <w>_llamacpp_prefill_tps   prompt of PREFILL_TOKENS random tokens
 *   <w>_decode_tps  / <w>_llamacpp_decode_tps    DECODE_TOKENS greedy steps after the prompt
 *   <w>_*_threads                               the thread count (1 or 2) that was best
 *   <w>_prefill_ratio, <w>_decode_ratio          ours / llama.cpp (targets ≥ 0.5 and ≥ 0.7)
 *   import_ms vs prefill_ms                      63 cached blocks (4032 tokens) imported as
 *                                                memory copies vs prefilled (target ≤ 0.02)
 *   f16_batch_decode_tps                         aggregate tok/s of decodeBatch over 8 sequences
 *   q4_k_m_bytes_per_param                       packed bytes the CPU engine holds per matrix
 *                                                weight (q4_k_m_gguf_bytes_per_param: in the file)
 *
 * KVTIER_BENCH_ENGINE_WEIGHTS=q4_k_m (comma list of f16, q8_0, q4_k_m) runs
 * only those weight types; the import/batch part runs when f16 is among them.
 *
 * Both sides use f16 KV. Each configuration is measured after a warm-up run.
 * Progress goes to stderr; the result object is what bench/main.ts prints.
 */
import * as os from 'node:os';
import { GgmlType, argmax, loadEngine, readGguf, resolveModelPath } from '../inference-core/index.ts';
import { nativeAddon } from '../native/index.ts';
import { randomTokens as promptOf } from '../test/inference-core/engine-fixtures.ts';
import { bestLlamaCppRates, bestOurRates, comparisonFields, prefillVsImport } from './engine-timing.ts';

const PREFILL_TOKENS = 2048;
const DECODE_TOKENS = 128;
const IMPORT_BLOCKS = 63;
const BATCH = 8;
const BATCH_STEPS = 32;
const THREAD_CHOICES = [1, 2].filter((t) => t <= Math.max(1, os.availableParallelism()));
const WEIGHT_TYPES = ['f16', 'q8_0', 'q4_k_m'] as const;
type BenchWeightType = (typeof WEIGHT_TYPES)[number];

function requestedWeightTypes(): BenchWeightType[] {
  const env = process.env.KVTIER_BENCH_ENGINE_WEIGHTS;
  if (!env) return [...WEIGHT_TYPES];
  const list = env.split(',').map((w) => w.trim()) as BenchWeightType[];
  const bad = list.filter((w) => !WEIGHT_TYPES.includes(w));
  if (bad.length) throw new Error(`KVTIER_BENCH_ENGINE_WEIGHTS: unknown ${bad.join(', ')}; use ${WEIGHT_TYPES.join(', ')}`);
  return list;
}

/** Bytes per parameter of the 2-D weights: as the CPU engine packs them, and in the GGUF file. */
function bytesPerParam(modelPath: string): { packed: number; gguf: number } {
  const addon = nativeAddon();
  const g = readGguf(modelPath);
  let params = 0;
  let packed = 0;
  let gguf = 0;
  try {
    for (const t of g.tensors.values()) {
      if (t.dims.length !== 2 || t.type === GgmlType.F32) continue;
      const [cols, rows] = t.dims;
      params += rows * cols;
      gguf += t.byteLength;
      packed += addon.packedWeightBytes(t.type, rows, cols);
    }
  } finally {
    g.close();
  }
  return { packed: packed / params, gguf: gguf / params };
}

function say(line: string): void {
  process.stderr.write(`bench engine: ${line}\n`);
}

export async function run(): Promise<Record<string, number | string>> {
  const dataDir = process.env.KVTIER_DATA_DIR ?? 'data';
  const result: Record<string, number | string> = {};
  const poolBytes = 512 * 2 ** 20;
  const weightTypes = requestedWeightTypes();
  for (const weightType of weightTypes) {
    const modelPath = resolveModelPath('synthetic:small', { dataDir, weightType });
    const { ours, vocab } = await bestOurRates(
      modelPath,
      { poolBytes, promptFor: (v) => promptOf(PREFILL_TOKENS, v, 7), decode: DECODE_TOKENS, warmupDecode: DECODE_TOKENS, threadChoices: THREAD_CHOICES },
      (threads, m) => say(`ours ${weightType} threads=${threads}: prefill ${m.prefillTps.toFixed(1)} tok/s, decode ${m.decodeTps.toFixed(2)} tok/s`),
    );
    const prompt = promptOf(PREFILL_TOKENS, vocab, 7);
    const ref = await bestLlamaCppRates(modelPath, prompt, DECODE_TOKENS, THREAD_CHOICES, 8, (threads, m) =>
      say(`llama.cpp ${weightType} threads=${threads}: prefill ${m.prefillTps.toFixed(1)} tok/s, decode ${m.decodeTps.toFixed(2)} tok/s`),
    );
    const w = weightType;
    Object.assign(result, comparisonFields(w, ours, ref, round));
    if (w === 'q4_k_m') {
      const b = bytesPerParam(modelPath);
      result.q4_k_m_bytes_per_param = round(b.packed, 4);
      result.q4_k_m_gguf_bytes_per_param = round(b.gguf, 4);
    }
  }

  // Import vs prefill of the same 4032 tokens (63 blocks), f16 weights and KV.
  if (weightTypes.includes('f16')) {
    const threads = Number(result['f16_prefill_threads']) || 1;
    const engine = await loadEngine('synthetic:small', { dataDir, weightType: 'f16', threads, kvDtype: 'f16', poolBytes });
    const n = IMPORT_BLOCKS * 64;
    const prompt = promptOf(n, engine.vocabSize, 11);
    const { prefillMs, importMs } = prefillVsImport(engine, prompt, IMPORT_BLOCKS);
    say(`import ${IMPORT_BLOCKS} blocks: ${importMs.toFixed(2)} ms vs prefill ${prefillMs.toFixed(0)} ms`);
    result.import_blocks = IMPORT_BLOCKS;
    result.import_bytes = IMPORT_BLOCKS * engine.kvLayout.blockBytes;
    result.import_ms = round(importMs, 3);
    result.prefill_ms = round(prefillMs, 1);
    result.import_over_prefill = round(importMs / prefillMs, 5);

    // Batched decode: BATCH sequences stepped together (one GEMM over their rows per weight).
    const seqs = Array.from({ length: BATCH }, () => engine.createSequence());
    let logits = seqs.map((s, i) => s.prefill(promptOf(128, engine.vocabSize, 20 + i)));
    const t2 = performance.now();
    for (let step = 0; step < BATCH_STEPS; step++) logits = engine.decodeBatch(seqs, logits.map(argmax));
    const batchMs = performance.now() - t2;
    for (const s of seqs) s.free();
    result.batch_size = BATCH;
    result.f16_batch_decode_tps = round((BATCH * BATCH_STEPS) / (batchMs / 1000));
    say(`decodeBatch of ${BATCH}: ${result.f16_batch_decode_tps} tok/s in aggregate`);
    engine.destroy();
  }
  result.prefill_tokens = PREFILL_TOKENS;
  result.decode_tokens = DECODE_TOKENS;
  return result;
}

function round(x: number, digits = 2): number {
  const k = 10 ** digits;
  return Math.round(x * k) / k;
}
