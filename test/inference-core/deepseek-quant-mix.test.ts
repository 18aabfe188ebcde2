/**
 * Synthetic deepseek2 files in the llama-quantize mixes are byte-identical to
 * llama.cpp's own llama-quantize (llama_model_quantize of the shipped libllama,
 * test/helpers/llamacpp-quantize.py) of the f32 file: every tensor's type and
 * bytes, including the 3-D expert tensors (quantized row by row, so per 2-D
 * slice), ffn_gate_inp kept F32, ffn_down* placed per layer (MoE), the legacy
 * attn_kv_b treated like attn_v, and the Q5_0/Q8_0 fallbacks of rows that are
 * not whole 256-blocks. deepseek-tiny ×4 wide (most rows whole K-quant blocks).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ggmlTypeName, readGguf } from '../../inference-core/gguf/index.ts';
import { ensureDeepseekModel, type DeepseekShape, type DeepseekWeightType } from '../../inference-core/synthetic/deepseek-synthetic.ts';

const BINS = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64');
const SCRIPT = path.resolve('test/helpers/llamacpp-quantize.py');
const FTYPE: Partial<Record<DeepseekWeightType, number>> = { q8_0: 7, q4_k_m: 15, q5_k_m: 17, q6_k: 18 };

let dataDir: string;
beforeAll(() => {
  dataDir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-ds-llq-'));
});
afterAll(() => fs.rmSync(dataDir, { recursive: true, force: true }));

function compare(shape: DeepseekShape, kvB: 'split' | 'fused', weightType: DeepseekWeightType): { bad: string[]; types: Set<string> } {
  const opts = { dataDir, shape, kvB, widen: 4 };
  const f32 = ensureDeepseekModel('deepseek-tiny', { ...opts, weightType: 'f32' });
  const out = path.join(dataDir, `llama-${weightType}-${path.basename(f32)}`);
  const r = spawnSync('python3', [SCRIPT, BINS, f32, out, String(FTYPE[weightType])], { encoding: 'utf8' });
  expect(r.status, r.stderr.slice(-2000)).toBe(0);
  const ours = readGguf(ensureDeepseekModel('deepseek-tiny', { ...opts, weightType }));
  const ref = readGguf(out);
  const bad: string[] = [];
  const types = new Set<string>();
  try {
    expect([...ours.tensors.keys()].sort()).toEqual([...ref.tensors.keys()].sort());
    for (const t of ours.tensors.values()) {
      const u = ref.tensor(t.name);
      types.add(ggmlTypeName(t.type));
      if (u.type !== t.type) bad.push(`${t.name}: ours ${ggmlTypeName(t.type)}, llama.cpp ${ggmlTypeName(u.type)}`);
      else if (!Buffer.from(u.data).equals(Buffer.from(t.data))) bad.push(`${t.name}: ${ggmlTypeName(t.type)} bytes differ`);
    }
  } finally {
    ours.close();
    ref.close();
  }
  return { bad, types };
}

describe('synthetic deepseek2 quant mixes == llama-quantize', () => {
  it.each([
    ['v3', 'split', 'q4_k_m'],
    ['v2-lite', 'split', 'q4_k_m'],
    ['v2-lite', 'fused', 'q4_k_m'],
    ['v3', 'split', 'q5_k_m'],
    ['v3', 'split', 'q6_k'],
    ['v3', 'split', 'q8_0'],
  ] as const)('%s %s %s: every tensor has llama.cpp\'s type and bytes', (shape, kvB, weightType) => {
    const { bad, types } = compare(shape, kvB, weightType);
    console.log(`deepseek ${shape} ${kvB} ${weightType}: types ${[...types].sort().join(', ')}`);
    expect(bad).toEqual([]);
  });
});
