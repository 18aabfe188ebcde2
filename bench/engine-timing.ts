/** Engine timings shared by bench/engine.ts and bench/engine-deepseek.ts (wall time of one fresh sequence each). */
import { argmax, type LoadedEngine } from '../inference-core/index.ts';
import { llamaBench } from '../test/helpers/llamacpp.ts';

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
): Promise<{ prefill: number; prefillThreads: number; decode: number; decodeThreads: number }> {
  const ref = { prefill: 0, prefillThreads: 0, decode: 0, decodeThreads: 0 };
  for (const threads of threadChoices) {
    await llamaBench({ modelPath, tokens: prompt.slice(0, 256), nPredict: warmupPredict, threads, kvType: 'f16' }); // warm-up
    const m = await llamaBench({ modelPath, tokens: prompt, nPredict: decode, threads, kvType: 'f16' });
    report(threads, m);
    if (m.prefillTps > ref.prefill) Object.assign(ref, { prefill: m.prefillTps, prefillThreads: threads });
    if (m.decodeTps > ref.decode) Object.assign(ref, { decode: m.decodeTps, decodeThreads: threads });
  }
  return ref;
}
