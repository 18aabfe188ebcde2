/**
 * Synthetic quantized models against llama.cpp's own llama-quantize: the f32
 * synthetic model is quantized by llama_model_quantize (the libllama
 * node-llama-cpp ships, through test/helpers/llamacpp-quantize.py) and every
 * tensor of our q4_k_m / q5_k_m / q6_k / q4_0 / q8_0 file must have the same
 * type and the same bytes as llama.cpp's. This checks the per-tensor mix
 * (quant-mix.ts) and the quantizers (native/src/quant) together.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ensureSyntheticModel, ggmlTypeName, readGguf, type SyntheticOptions, type SyntheticWeightType } from '../../inference-core/index.ts';

const BINS = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');
const SCRIPT = path.resolve('test/helpers/llamacpp-quantize.py');
/** llama_ftype of each mix (llama.h). */
const FTYPE: Partial<Record<SyntheticWeightType, number>> = { q4_0: 2, q8_0: 7, q4_k_m: 15, q5_k_m: 17, q6_k: 18 };

let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-llq-'));
});
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function compare(weightType: SyntheticWeightType, options: Omit<SyntheticOptions, 'dataDir' | 'weightType'>): string[] {
  const f32 = ensureSyntheticModel('tiny', { ...options, dataDir, weightType: 'f32', progress: null });
  const out = path.join(dataDir, `llama-${weightType}-${path.basename(f32)}`);
  const r = spawnSync('python3', [SCRIPT, BINS, f32, out, String(FTYPE[weightType])], { encoding: 'utf8' });
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  const ours = readGguf(ensureSyntheticModel('tiny', { ...options, dataDir, weightType, progress: null }));
  const ref = readGguf(out);
  try {
    expect([...ref.tensors.keys()].sort()).toEqual([...ours.tensors.keys()].sort());
    const bad: string[] = [];
    for (const t of ours.tensors.values()) {
      const u = ref.tensor(t.name);
      if (u.type !== t.type) bad.push(`${t.name}: ours ${ggmlTypeName(t.type)}, llama.cpp ${ggmlTypeName(u.type)}`);
      else if (!Buffer.from(u.data).equals(Buffer.from(t.data))) bad.push(`${t.name}: ${ggmlTypeName(t.type)} bytes differ`);
    }
    return bad;
  } finally {
    ours.close();
    ref.close();
  }
}

describe('synthetic quantized models are what llama-quantize writes', () => {
  // 256-wide rows (K-quants without fallback), 9 layers (use_more_bits picks 0, 3, 6, 7, 8), untied head
  const wide = { overrides: { dModel: 256, ffnDim: 512, nLayers: 9, nHeads: 4, nKvHeads: 2 } };
  for (const weightType of ['q4_k_m', 'q5_k_m', 'q6_k', 'q4_0', 'q8_0'] as const) {
    it(`${weightType}: every tensor's type and bytes (d=256, 9 layers, untied)`, () => {
      expect(compare(weightType, wide)).toEqual([]);
    });
  }

  it('q4_k_m with tied embeddings (token_embd takes the head\'s Q6_K)', () => {
    expect(compare('q4_k_m', { overrides: { ...wide.overrides, nLayers: 4, tiedEmbeddings: true } })).toEqual([]);
  });

  it('q4_k_m and q5_k_m of synthetic:tiny (64-wide rows: llama.cpp\'s fallbacks to Q5_0/Q5_1/Q8_0)', () => {
    expect(compare('q4_k_m', {})).toEqual([]);
    expect(compare('q5_k_m', {})).toEqual([]);
  });

  it('qwen2 architecture (biases stay F32)', () => {
    expect(compare('q4_k_m', { ...wide, arch: 'qwen2' })).toEqual([]);
  });
});
