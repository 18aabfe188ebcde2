/**
 * synthetic deepseek4-tiny (inference-core/synthetic/deepseek4-synthetic.ts):
 * the file carries every key and tensor llama.cpp's deepseek4 loader reads,
 * llama.cpp (node-llama-cpp 3.21.1) loads it and evaluates prompts that cross
 * the SWA window, CSA/HCA groups and the indexer's top-k, and bad specs are
 * typed errors.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';

import { GgmlType, readGguf } from '../../inference-core/gguf/index.ts';
import { loadEngine, resolveModelPath } from '../../inference-core/engine/load-model.ts';
import { DEEPSEEK4_SYNTHETIC_SPECS, deepseek4ModelPath, ensureDeepseek4Model } from '../../inference-core/synthetic/index.ts';
import { llamaBatch } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

const spec = DEEPSEEK4_SYNTHETIC_SPECS['deepseek4-tiny'];
const prompt = (n: number) => Array.from({ length: n }, (_, i) => (i * 37 + 11) % 500);

describe('synthetic deepseek4', () => {
  it('writes the deepseek4 keys and tensors: hyper-connections, compressors, indexer, hash routing, MTP', () => {
    const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR });
    expect(file).toBe(deepseek4ModelPath('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' }));
    const g = readGguf(file);
    try {
      expect(g.optString('general.architecture')).toBe('deepseek4');
      expect(g.optU32('deepseek4.block_count')).toBe(spec.nLayers + spec.nMtp);
      expect(g.optU32('deepseek4.nextn_predict_layers')).toBe(1);
      expect(g.optU32('deepseek4.hyper_connection.count')).toBe(4);
      expect(g.optU32('deepseek4.expert_gating_func')).toBe(4);
      const names = new Set(g.tensors.keys());
      for (const n of ['output_hc_fn.weight', 'blk.0.ffn_gate_tid2eid.weight', 'blk.1.indexer.attn_q_b.weight', 'blk.1.indexer_compressor_ape.weight',
        'blk.2.attn_compressor_kv.weight', 'blk.2.exp_probs_b.bias', 'blk.5.nextn.eh_proj.weight', 'blk.4.hc_ffn_scale.weight']) expect(names, n).toContain(n);
      // HCA layers have no indexer; hash layers no selection bias
      expect(names).not.toContain('blk.2.indexer.proj.weight');
      expect(names).not.toContain('blk.0.exp_probs_b.bias');
      const tid = g.tensor('blk.0.ffn_gate_tid2eid.weight');
      expect(tid.dims).toEqual([spec.expertUsed, g.optStringArray('tokenizer.ggml.tokens')!.length]);
      const ids = new Int32Array(tid.data.slice().buffer);
      for (let t = 0; t < ids.length; t += spec.expertUsed) {
        expect(ids[t]).not.toBe(ids[t + 1]);
        for (let k = 0; k < spec.expertUsed; k++) expect(ids[t + k]! >= 0 && ids[t + k]! < spec.expertCount).toBe(true);
      }
    } finally {
      g.close();
    }
  });

  it('llama.cpp loads F32 / F16 / Q8_0 files and evaluates 1, 65 and 300 tokens to finite, distinct logits', async () => {
    const files = (['f32', 'f16', 'q8_0'] as const).map((weightType) => ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType }));
    const res = await llamaBatch(files.map((modelPath) => ({ op: 'logitsMany' as const, modelPath, prompts: [prompt(1), prompt(65), prompt(300)], kvType: 'f32' as const })));
    for (const r of res) {
      for (const lp of r.logprobs!) {
        expect(lp.every((x) => x !== null && Number.isFinite(x))).toBe(true);
        const v = lp as number[];
        const mean = v.reduce((a, b) => a + b, 0) / v.length;
        const sd = Math.sqrt(v.reduce((a, b) => a + (b - mean) ** 2, 0) / v.length);
        expect(sd).toBeGreaterThan(0.3); // not a flat distribution
      }
      expect(r.logprobs![1]![0]).not.toBe(r.logprobs![2]![0]);
    }
    // the three types are the same weights: Q8_0 stays close to F32
    const diff = Math.max(...res[0]!.logprobs![2]!.map((x, i) => Math.abs(x! - res[2]!.logprobs![2]![i]!)));
    expect(diff).toBeLessThan(0.5);
  }, 300_000);

  it('typed errors for ratios llama.cpp rejects and ratio arrays of the wrong length', () => {
    expect(() => ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, override: { compressRatios: [0, 8, 128, 4, 128, 0] } })).toThrow(expect.objectContaining({ code: 'KVT_ERR_SYNTHETIC_SPEC' }));
    expect(() => ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, override: { compressRatios: [0, 4] } })).toThrow(expect.objectContaining({ code: 'KVT_ERR_SYNTHETIC_SPEC' }));
    expect(() => ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, override: { compressRatios: [0, 4, 128, 4, 128, 4] } })).toThrow(expect.objectContaining({ code: 'KVT_ERR_SYNTHETIC_SPEC' }));
  });
});

describe('synthetic deepseek4 against llama-quantize', () => {
  it('F16, BF16, Q8_0, Q4_K_M and MXFP4_MOE files have the tensor types and bytes llama-quantize writes from the F32 file', () => {
    const bins = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');
    const f32 = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
    const seen = new Set<GgmlType>();
    for (const [weightType, ftype] of [['f16', 1], ['bf16', 32], ['q8_0', 7], ['q4_k_m', 15], ['mxfp4_moe', 38]] as const) {
      const out = path.join(path.dirname(f32), `llama-quantize-${weightType}-${path.basename(f32)}`);
      const r = spawnSync('python3', [path.resolve('test/helpers/llamacpp-quantize.py'), bins, f32, out, String(ftype)], { encoding: 'utf8' });
      expect(r.status, r.stderr.slice(-2000)).toBe(0);
      const ref = readGguf(out);
      const ours = readGguf(ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType }));
      try {
        expect([...ours.tensors.keys()].sort()).toEqual([...ref.tensors.keys()].sort());
        for (const [name, t] of ref.tensors) {
          const o = ours.tensor(name);
          expect(o.type, `${weightType} ${name}`).toBe(t.type);
          seen.add(t.type);
          expect(Buffer.from(o.data).equals(Buffer.from(t.data)), `${weightType} ${name} bytes`).toBe(true);
        }
        expect(ours.optU32('general.file_type')).toBe(ref.optU32('general.file_type'));
      } finally {
        ours.close();
        ref.close();
      }
    }
    // the mixes exercise real K-quant blocks, their fallbacks and MXFP4 experts
    for (const t of [GgmlType.BF16, GgmlType.Q4_K, GgmlType.Q5_0, GgmlType.Q8_0, GgmlType.MXFP4]) expect(seen, GgmlType[t]).toContain(t);
  }, 300_000);
});

describe('synthetic:deepseek4-* specs', () => {
  it('resolve to the generated files; loadEngine serves deepseek4 with its state outside the block tier', async () => {
    expect(resolveModelPath('synthetic:deepseek4-tiny:q8_0', { dataDir: TEST_DATA_DIR })).toBe(deepseek4ModelPath('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'q8_0', vocab: 'deepseek-v3' }));
    expect(() => resolveModelPath('synthetic:deepseek4-huge', { dataDir: TEST_DATA_DIR })).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT' }));
    expect(() => resolveModelPath('synthetic:deepseek4-tiny:q4_0', { dataDir: TEST_DATA_DIR })).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_BAD_ARGUMENT' }));
    const engine = await loadEngine(ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f16' }), { dataDir: TEST_DATA_DIR });
    try {
      expect(engine.hasRecurrentState).toBe(true);
      expect(engine.createSequence().prefill([1, 2, 3]).length).toBe(engine.vocabSize);
    } finally {
      engine.destroy();
    }
  }, 120_000);
});
