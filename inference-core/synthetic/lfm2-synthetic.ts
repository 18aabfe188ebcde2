/**
 * Synthetic LFM2 models (`lfm2`): random-weight GGUFs with the metadata keys
 * and tensors convert_hf_to_gguf.py writes for LFM2, for parity tests
 * against llama.cpp.
 *
 *   lfm2-tiny   d 64, 6 layers: conv conv attn conv conv attn (head_count_kv
 *               per layer [0,0,2,0,0,2]), 4 heads / 2 kv heads, head_dim 16,
 *               ffn 128, shortconv.l_cache 3, freq_base 1e6, rms eps 1e-5, tied head.
 *
 * Vocabulary: the synthetic byte-level BPE (LFM2's own is not shipped by any
 * npm package in node_modules).
 * Init: matrices N(0, 0.02), embeddings N(0, 1/√d), norms 1 + N(0, 0.02),
 * attn_q/attn_k and shortconv.in_proj N(0, 1.6/√d) and convolution taps
 * N(0, 0.5), so the convolution path moves the logits (with 0.02 its output
 * is ~1e-4 of the residual and a wrong conv state would hardly show).
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { GgmlType, GgufWriter, gv, quantize, type GgufValue } from '../gguf/index.ts';
import { Xoshiro128, seedFromString } from './prng.ts';
import { SYNTHETIC_FILE_TYPE } from './quant-mix.ts';
import { SYNTHETIC_GENERATOR_VERSION } from './synthetic-model.ts';
import { baseModelMetadata } from './synthetic-metadata.ts';
import { byteLevelVocabMetadata, loadCorpus } from './synthetic-vocab.ts';

const LFM2_SYNTHETIC_VERSION = 1;
export type Lfm2WeightType = 'f16' | 'q8_0';

const SPEC = { dModel: 64, nLayers: 6, nHeads: 4, nKvHeads: 2, kvPerLayer: [0, 0, 2, 0, 0, 2], ffnDim: 128, vocabSize: 512, ctxLen: 4096, ropeTheta: 1e6, rmsEps: 1e-5, convL: 3 };

export function ensureLfm2Model(o: { dataDir: string; weightType?: Lfm2WeightType }): string {
  const weightType = o.weightType ?? 'f16';
  const h = createHash('sha256')
    .update(JSON.stringify({ v: LFM2_SYNTHETIC_VERSION, gen: SYNTHETIC_GENERATOR_VERSION, SPEC, weightType }))
    .update(loadCorpus().hash)
    .digest('hex')
    .slice(0, 12);
  const file = path.join(o.dataDir, 'models', `synthetic-lfm2-tiny-${weightType}-${h}.gguf`);
  if (fs.existsSync(file)) return file;
  fs.mkdirSync(path.dirname(file), { recursive: true });
  write(file, weightType);
  return file;
}

function write(file: string, weightType: Lfm2WeightType): void {
  const s = SPEC;
  const a = 'lfm2';
  const vocab = byteLevelVocabMetadata(s.vocabSize, 'qwen2');
  const d = s.dModel;
  const headDim = d / s.nHeads;
  const w = new GgufWriter(file);
  try {
    const base = baseModelMetadata(a, 'kvtier synthetic lfm2-tiny', SYNTHETIC_FILE_TYPE[weightType], s).filter(([k]) => k !== `${a}.attention.head_count_kv`);
    const meta: Array<[string, GgufValue]> = [
      ...base,
      [`${a}.attention.head_count_kv`, gv.i32s(Int32Array.from(s.kvPerLayer))],
      [`${a}.shortconv.l_cache`, gv.u32(s.convL)],
      [`${a}.vocab_size`, gv.u32(vocab.vocabSize)],
      ...vocab.metadata,
    ];
    for (const [k, v] of meta) w.setMetadata(k, v);
    const plan: Array<{ name: string; dims: number[]; matrix: boolean; mean: number; std: number }> = [];
    const mat = (name: string, cols: number, rows: number, std = 0.02) => plan.push({ name, dims: [cols, rows], matrix: true, mean: 0, std });
    const vec = (name: string, n: number) => plan.push({ name, dims: [n], matrix: false, mean: 1, std: 0.02 });
    const big = 1.6 / Math.sqrt(d);
    mat('token_embd.weight', d, vocab.vocabSize, 1 / Math.sqrt(d));
    for (let l = 0; l < s.nLayers; l++) {
      const p = `blk.${l}.`;
      vec(p + 'attn_norm.weight', d);
      if (s.kvPerLayer[l] > 0) {
        const kv = s.kvPerLayer[l] * headDim;
        mat(p + 'attn_q.weight', d, d, big);
        mat(p + 'attn_k.weight', d, kv, big);
        mat(p + 'attn_v.weight', d, kv);
        vec(p + 'attn_q_norm.weight', headDim);
        vec(p + 'attn_k_norm.weight', headDim);
        mat(p + 'attn_output.weight', d, d);
      } else {
        plan.push({ name: p + 'shortconv.conv.weight', dims: [s.convL, d], matrix: false, mean: 0, std: 0.5 });
        mat(p + 'shortconv.in_proj.weight', d, 3 * d, big);
        mat(p + 'shortconv.out_proj.weight', d, d);
      }
      vec(p + 'ffn_norm.weight', d);
      mat(p + 'ffn_gate.weight', d, s.ffnDim);
      mat(p + 'ffn_up.weight', d, s.ffnDim);
      mat(p + 'ffn_down.weight', s.ffnDim, d);
    }
    vec('token_embd_norm.weight', d);
    const type = weightType === 'f16' ? GgmlType.F16 : GgmlType.Q8_0;
    for (const t of plan) w.addTensor({ name: t.name, type: t.matrix ? type : GgmlType.F32, dims: t.dims });
    for (const t of plan) {
      const values = new Float32Array(t.dims.reduce((x, y) => x * y, 1));
      new Xoshiro128((seedFromString(`lfm2-tiny:${t.name}`) ^ 0x9e3779b1) >>> 0).fillNormal(values, t.mean, t.std);
      w.writeTensorData(t.name, t.matrix ? quantize(type, values) : values);
    }
    w.finish();
  } catch (err) {
    w.abort();
    throw err;
  }
}
