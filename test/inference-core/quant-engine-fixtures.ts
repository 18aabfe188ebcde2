/**
 * Fixtures of the engine-on-quantized-weights tests (engine-kquant,
 * engine-legacy-quant, synthetic): a model's matrices requantized to one
 * type, and the next-token comparison with llama.cpp after 8 tokens.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { dequantize, GgmlType, loadEngine, quantize, readGguf, writeGguf, type LoadedEngine } from '../../inference-core/index.ts';
import { llamaLogprobs } from '../helpers/llamacpp.ts';

/**
 * `source` written to `out` with every 2-D matrix whose rows are whole
 * `block`-value blocks requantized to `type` (the rest keep their type).
 */
export function requantizeMatrices(source: string, type: GgmlType, block: number, out: string): { file: string; converted: number } {
  const src = readGguf(source);
  let converted = 0;
  const tensors = [...src.tensors.values()].map((t) => {
    if (t.dims.length < 2 || t.dims[0]! % block !== 0) return { name: t.name, dims: t.dims, type: t.type, data: t.data };
    converted++;
    return { name: t.name, dims: t.dims, type, data: quantize(type, dequantize(t.type, t.data, t.elements)) };
  });
  const file = writeGguf(out, src.metadata, tensors);
  src.close();
  return { file, converted };
}

/**
 * Next-token log-probabilities after tokens 1..8 from the engine on `model`
 * (a file or spec) and from llama.cpp on the same file (f32 KV, one thread):
 * the largest difference and both argmaxes.
 */
export async function nextTokenVsLlamaCpp(model: string, dataDir: string): Promise<{ worst: number; argmax: number; refArgmax: number }> {
  const engine = await loadEngine(model, { dataDir, kvDtype: 'f32', threads: 1 });
  try {
    return await compareNextToken(engine);
  } finally {
    engine.destroy();
  }
}

async function compareNextToken(engine: LoadedEngine): Promise<{ worst: number; argmax: number; refArgmax: number }> {
  const tokens = [1, 2, 3, 4, 5, 6, 7, 8];
  const seq = engine.createSequence();
  const logits = seq.prefill(tokens);
  seq.free();
  const max = Math.max(...logits);
  const lse = max + Math.log(logits.reduce((a, v) => a + Math.exp(v - max), 0));
  const ref = await llamaLogprobs({ modelPath: engine.modelPath, tokens, threads: 1, kvType: 'f32' });
  let worst = 0;
  ref.forEach((r, i) => {
    if (r !== null) worst = Math.max(worst, Math.abs(logits[i]! - lse - r));
  });
  return { worst, argmax: logits.indexOf(max), refArgmax: ref.indexOf(Math.max(...ref.map((v) => v ?? -Infinity))) };
}

/**
 * One test per type, named as llama.cpp's file types name it (q4_K, iq4_nl): the model `requantized` writes into a temp dir (gone after the file's
 * tests) has matrices converted, and its next-token log-probs are within `tol` of llama.cpp's with
 * the same argmax.
 */
export function describeRequantizedVsLlamaCpp(
  title: string,
  o: { cases: string[]; tol: number; timeoutMs: number; tempPrefix: string },
  requantized: (dataDir: string, type: GgmlType, name: string) => { file: string; converted: number },
): void {
  let dataDir: string;
  beforeAll(() => {
    dataDir = fs.mkdtempSync(path.join(os.tmpdir(), o.tempPrefix));
  });
  afterAll(() => {
    fs.rmSync(dataDir, { recursive: true, force: true });
  });
  describe(title, () => {
    const cases = o.cases.map((name) => {
      const type = GgmlType[name.toUpperCase() as keyof typeof GgmlType];
      if (type === undefined) throw new Error(`${name} names no ggml type`);
      return [name, type] as const;
    });
    it.each(cases)(`%s (ggml type %i): next-token log-probabilities within ${o.tol} of llama.cpp, same argmax`, async (name, type) => {
      const { file, converted } = requantized(dataDir, type, name);
      expect(converted).toBeGreaterThan(0);
      const { worst, argmax, refArgmax } = await nextTokenVsLlamaCpp(file, dataDir);
      expect(worst, `${name}: ${converted} tensors requantized`).toBeLessThan(o.tol);
      expect(argmax).toBe(refArgmax);
    }, o.timeoutMs);
  });
}
