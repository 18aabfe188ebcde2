import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GgmlType,
  SYNTHETIC_SPECS,
  Tokenizer,
  dequantizeQ8_0,
  ensureSyntheticModel,
  f16ToF32,
  modelConfigFromGguf,
  modelTensorNames,
  readGguf,
  syntheticModelPath,
} from '../../inference-core/index.ts';

let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-syn-'));
});
afterAll(() => {
  fs.rmSync(dataDir, { recursive: true, force: true });
});

const sha = (file: string) => createHash('sha256').update(fs.readFileSync(file)).digest('hex');

function stats(x: Float32Array): { mean: number; std: number } {
  let s = 0;
  let s2 = 0;
  for (const v of x) {
    s += v;
    s2 += v * v;
  }
  const mean = s / x.length;
  return { mean, std: Math.sqrt(s2 / x.length - mean * mean) };
}

describe('synthetic models', () => {
  it('creates tiny under <dataDir>/models on first use and reuses it afterwards', () => {
    const lines: string[] = [];
    const file = ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: (l) => lines.push(l) });
    expect(path.dirname(file)).toBe(path.join(dataDir, 'models'));
    expect(path.basename(file)).toMatch(/^synthetic-tiny-llama-qwen2-f32-[0-9a-f]{12}\.gguf$/);
    expect(lines.some((l) => l.includes('generating'))).toBe(true);
    const before = fs.statSync(file);
    const again: string[] = [];
    expect(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: (l) => again.push(l) })).toBe(file);
    expect(again).toEqual([]);
    expect(fs.statSync(file).mtimeMs).toBe(before.mtimeMs);
    // No temp files left behind.
    expect(fs.readdirSync(path.join(dataDir, 'models')).filter((f) => f.includes('.tmp-'))).toEqual([]);
  });

  it('is deterministic: the same options give byte-identical files in another data dir', () => {
    const other = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-syn2-'));
    try {
      for (const weightType of ['f16', 'q8_0'] as const) {
        const a = ensureSyntheticModel('tiny', { dataDir, weightType, progress: null });
        const b = ensureSyntheticModel('tiny', { dataDir: other, weightType, progress: null });
        expect(path.basename(a)).toBe(path.basename(b));
        expect(sha(a)).toBe(sha(b));
      }
    } finally {
      fs.rmSync(other, { recursive: true, force: true });
    }
  });

  it('rejects an unknown model name with a typed error', () => {
    expect(() => ensureSyntheticModel('huge' as never, { dataDir, progress: null })).toThrow(expect.objectContaining({ code: 'KVT_ERR_SYNTHETIC_UNKNOWN' }));
  });

  it('names files by everything that changes their bytes', () => {
    const base = { dataDir, weightType: 'f16' as const };
    const names = new Set([
      syntheticModelPath('tiny', base),
      syntheticModelPath('tiny', { ...base, weightType: 'q8_0' }),
      syntheticModelPath('tiny', { ...base, arch: 'qwen2' }),
      syntheticModelPath('tiny', { ...base, pre: 'llama-bpe' }),
      syntheticModelPath('tiny', { ...base, tokenizer: 'spm' }),
      syntheticModelPath('tiny', { ...base, seed: 1 }),
      syntheticModelPath('small', base),
    ]);
    expect(names.size).toBe(7);
    expect(syntheticModelPath('tiny', base)).toBe(syntheticModelPath('tiny', { ...base }));
  });

  it('has the llama metadata, tensor set and shapes modelConfigFromGguf expects', () => {
    const g = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null }));
    const cfg = modelConfigFromGguf(g);
    const spec = SYNTHETIC_SPECS.tiny;
    expect(cfg).toEqual({
      arch: 'llama',
      nLayers: spec.nLayers,
      dModel: spec.dModel,
      nHeads: spec.nHeads,
      nKvHeads: spec.nKvHeads,
      headDim: spec.dModel / spec.nHeads,
      ffnDim: spec.ffnDim,
      vocabSize: 512,
      ctxLen: spec.ctxLen,
      ropeTheta: spec.ropeTheta,
      ropeType: 'normal',
      ropeDims: spec.dModel / spec.nHeads,
      rmsEps: Math.fround(spec.rmsEps),
      qkvBias: false,
      tiedEmbeddings: false,
    });
    const names = modelTensorNames(cfg);
    expect(names.output).toBe('output.weight');
    expect(names.layers[1].ffnDown).toBe('blk.1.ffn_down.weight');
    expect(g.tensor('blk.0.attn_k.weight').dims).toEqual([64, 32]);
    expect(g.tensor('token_embd.weight').dims).toEqual([64, 512]);
    expect(Tokenizer.fromGguf(g).vocabSize).toBe(cfg.vocabSize);
  });

  it('qwen2 variant: neox rope, QKV biases', () => {
    const g = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'q8_0', arch: 'qwen2', progress: null }));
    const cfg = modelConfigFromGguf(g);
    expect(cfg.arch).toBe('qwen2');
    expect(cfg.ropeType).toBe('neox');
    expect(cfg.qkvBias).toBe(true);
    expect(modelTensorNames(cfg).layers[0].kBias).toBe('blk.0.attn_k.bias');
    expect(g.tensor('blk.0.attn_q.bias').type).toBe(GgmlType.F32);
    expect(g.tensor('blk.0.attn_q.weight').type).toBe(GgmlType.Q8_0);
  });

  it('weights are scaled like a real init: matrices N(0, 0.02), norms ≈ 1, embeddings N(0, 1/√d)', () => {
    const g = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f16', progress: null }));
    const q = g.tensor('blk.1.attn_q.weight');
    const qs = stats(f16ToF32(new Uint16Array(q.data.slice().buffer)));
    expect(Math.abs(qs.mean)).toBeLessThan(0.002);
    expect(qs.std).toBeGreaterThan(0.018);
    expect(qs.std).toBeLessThan(0.022);
    const norm = g.tensor('blk.0.ffn_norm.weight');
    expect(norm.type).toBe(GgmlType.F32);
    const ns = stats(new Float32Array(norm.data.slice().buffer));
    expect(Math.abs(ns.mean - 1)).toBeLessThan(0.01);
    const e = stats(f16ToF32(new Uint16Array(g.tensor('token_embd.weight').data.slice().buffer)));
    expect(e.std).toBeGreaterThan(0.9 / 8);
    expect(e.std).toBeLessThan(1.1 / 8);
    // Different tensors draw different numbers.
    const k = g.tensor('blk.1.attn_k.weight').data;
    expect(Buffer.from(k.subarray(0, 64)).equals(Buffer.from(q.data.subarray(0, 64)))).toBe(false);
  });

  it('q8_0 weights dequantize close to the f32 file', () => {
    const f = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'f32', progress: null }));
    const q = readGguf(ensureSyntheticModel('tiny', { dataDir, weightType: 'q8_0', progress: null }));
    const a = new Float32Array(f.tensor('blk.0.ffn_up.weight').data.slice().buffer);
    const b = dequantizeQ8_0(q.tensor('blk.0.ffn_up.weight').data, a.length);
    let maxErr = 0;
    for (let i = 0; i < a.length; i++) maxErr = Math.max(maxErr, Math.abs(a[i] - b[i]));
    expect(maxErr).toBeGreaterThan(0);
    expect(maxErr).toBeLessThan(0.1 / 127); // half a quant step of the largest block (|x| < 0.1)
  });

  it('small: ~80 M params with the suggested dims and a tied head', () => {
    const lines: string[] = [];
    const file = ensureSyntheticModel('small', { dataDir, weightType: 'q8_0', progress: (l) => lines.push(l) });
    expect(lines.some((l) => l.includes('layer 12/12'))).toBe(true);
    const g = readGguf(file);
    const cfg = modelConfigFromGguf(g);
    expect(cfg).toMatchObject({ dModel: 768, nLayers: 12, nHeads: 12, nKvHeads: 4, headDim: 64, ffnDim: 2048, ctxLen: 8192, tiedEmbeddings: true });
    expect(cfg.vocabSize).toBeGreaterThan(2048);
    let params = 0;
    for (const t of g.tensors.values()) params += t.elements;
    expect(params).toBeGreaterThan(60e6);
    expect(params).toBeLessThan(110e6);
  });
});
