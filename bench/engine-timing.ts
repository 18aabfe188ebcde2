/** Engine timings shared by bench/engine.ts and bench/engine-deepseek.ts (wall time of one fresh sequence each). */
import { argmax, loadEngine, type LoadedEngine } from '../inference-core/index.ts';
import { llamaBench } from '../test/helpers/llamacpp.ts';

export interface BestRates {
  prefill: number;
  prefillThreads: number;
  decode: number;
  decodeThreads: number;
}

/** Prefill `prompt`, then `decode` greedy steps. */
export function measurePrefillDecode(engine: LoadedEngine, prompt: number[], decode: number): { prefillMs: number; prefillTps: number; decodeTps: number } {
  const seq = engine.createSequence();
  const t0 = performance.now();
  let logits = seq.prefill(prompt);
  const t1 = performance.now();
  for (let i = 0; i < decode; i++) logits = seq.decode(argmax(logits));
  const t2 = performance.now();
  seq.free();
  return { prefillMs: t1 - t0, prefillTps: prompt.length / ((t1 - t0) / 1000), decodeTps: decode / ((t2 - t1) / 1000) };
}

/** Prefilling `prompt` vs importing its first `blocks` exported blocks into a fresh sequence (best of 5 imports). */
export function prefillVsImport(engine: LoadedEngine, prompt: number[], blocks: number): { prefillMs: number; importMs: number } {
  const src = engine.createSequence();
  const t0 = performance.now();
  src.prefill(prompt);
  const prefillMs = performance.now() - t0;
  const exported = src.exportBlocks(0, blocks);
  src.free();
  let importMs = Infinity;
  for (let rep = 0; rep < 5; rep++) {
    const dst = engine.createSequence();
    const t1 = performance.now();
    dst.importBlocks(exported);
    importMs = Math.min(importMs, performance.now() - t1);
    dst.free();
  }
  return { prefillMs, importMs };
}

/**
 * llama.cpp's best prefill and best decode rate on `modelPath` over
 * `threadChoices` (f16 KV), each after a 256-token warm-up run; `report`
 * gets every measurement.
 */
export async function bestLlamaCppRates(
  modelPath: string,
  prompt: number[],
  decode: number,
  threadChoices: number[],
  warmupPredict: number,
  report: (threads: number, m: { prefillTps: number; decodeTps: number }) => void,
): Promise<BestRates> {
  const ref = { prefill: 0, prefillThreads: 0, decode: 0, decodeThreads: 0 };
  for (const threads of threadChoices) {
    await llamaBench({ modelPath, tokens: prompt.slice(0, 256), nPredict: warmupPredict, threads, kvType: 'f16' }); // warm-up
    const m = await llamaBench({ modelPath, tokens: prompt, nPredict: decode, threads, kvType: 'f16' });
    report(threads, m);
    keepBest(ref, threads, m);
  }
  return ref;
}

/**
 * Our best prefill and best decode rate on `modelPath` over `threadChoices` (a fresh engine each,
 * f16 KV), each after a warm-up on the prompt's first 256 tokens with `warmupDecode` greedy steps;
 * `report` gets every measurement, `inspect` each engine before it is destroyed. `vocab`: the
 * model's, for the caller's prompts.
 */
export async function bestOurRates(
  modelPath: string,
  o: { poolBytes: number; promptFor: (vocab: number) => number[]; decode: number; warmupDecode: number; threadChoices: number[] },
  report: (threads: number, m: { prefillTps: number; decodeTps: number }) => void,
  inspect?: (engine: LoadedEngine, threads: number) => void,
): Promise<{ ours: BestRates; vocab: number }> {
  const ours = { prefill: 0, prefillThreads: 0, decode: 0, decodeThreads: 0 };
  let vocab = 0;
  for (const threads of o.threadChoices) {
    const engine = await loadEngine(modelPath, { threads, kvDtype: 'f16', poolBytes: o.poolBytes });
    vocab = engine.vocabSize;
    const prompt = o.promptFor(vocab);
    measurePrefillDecode(engine, prompt.slice(0, 256), o.warmupDecode); // warm-up: pack weights, page them in
    const m = measurePrefillDecode(engine, prompt, o.decode);
    report(threads, m);
    keepBest(ours, threads, m);
    inspect?.(engine, threads);
    engine.destroy();
  }
  return { ours, vocab };
}

/** The comparison fields both engine benches report under `prefix` (rates rounded by `round`, ratios to 3 digits). */
export function comparisonFields(prefix: string, ours: BestRates, ref: BestRates, round: (x: number, digits?: number) => number): Record<string, number> {
  return {
    [`${prefix}_prefill_tps`]: round(ours.prefill),
    [`${prefix}_decode_tps`]: round(ours.decode),
    [`${prefix}_llamacpp_prefill_tps`]: round(ref.prefill),
    [`${prefix}_llamacpp_decode_tps`]: round(ref.decode),
    [`${prefix}_prefill_threads`]: ours.prefillThreads,
    [`${prefix}_decode_threads`]: ours.decodeThreads,
    [`${prefix}_llamacpp_prefill_threads`]: ref.prefillThreads,
    [`${prefix}_llamacpp_decode_threads`]: ref.decodeThreads,
    [`${prefix}_prefill_ratio`]: round(ours.prefill / ref.prefill, 3),
    [`${prefix}_decode_ratio`]: round(ours.decode / ref.decode, 3),
  };
}

/** Keeps the best prefill and the best decode rate seen, each with its thread count. */
function keepBest(best: BestRates, threads: number, m: { prefillTps: number; decodeTps: number }): void {
  if (m.prefillTps > best.prefill) Object.assign(best, { prefill: m.prefillTps, prefillThreads: threads });
  if (m.decodeTps > best.decode) Object.assign(best, { decode: m.decodeTps, decodeThreads: threads });
}
