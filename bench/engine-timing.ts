/** Engine timings shared by bench/engine.ts and bench/engine-deepseek.ts (wall time of one fresh sequence each). */
import { argmax, type LoadedEngine } from '../inference-core/index.ts';

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
