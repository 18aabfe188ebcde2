/**
 * Rope-scaling metadata read with llama.cpp's loader semantics (model-config.ts)
 * and turned into the native op's parameters with its context arithmetic
 * (engine/rope-scaling.ts), and the files the engine refuses with a typed
 * error (as llama.cpp refuses or mis-handles them). Variants are rewritten
 * copies of arch-variants.ts files with one key or tensor changed.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { loadEngine } from '../../inference-core/engine/index.ts';
import { ropeScalingFrom } from '../../inference-core/engine/rope-scaling.ts';
import { gv, readGguf, writeGguf, type GgufValue } from '../../inference-core/gguf/index.ts';
import { modelConfigFromGguf } from '../../inference-core/model-config.ts';
import { ensureArchVariantModel, type ArchVariant } from '../../inference-core/synthetic/arch-variants.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

const dir = fs.mkdtempSync(path.join(TEST_DATA_DIR, 'rope-scaling-'));
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

/** A copy of a variant's f16 file with metadata keys set (undefined: removed) and tensors dropped or added. */
function rewrite(variant: ArchVariant, set: Record<string, GgufValue | undefined>, o: { dropTensors?: string[]; addF32?: Record<string, Float32Array> } = {}): string {
  const src = readGguf(ensureArchVariantModel(variant, { dataDir: TEST_DATA_DIR, weightType: 'f16' }));
  try {
    const meta = new Map(src.metadata);
    for (const [k, v] of Object.entries(set)) {
      if (v === undefined) meta.delete(k);
      else meta.set(k, v);
    }
    meta.delete('general.alignment');
    const tensors = [...src.tensors.values()]
      .filter((t) => !o.dropTensors?.includes(t.name))
      .map((t) => ({ name: t.name, type: t.type, dims: t.dims, data: t.data.slice() }));
    for (const [name, values] of Object.entries(o.addF32 ?? {})) tensors.push({ name, type: 0, dims: [values.length], data: new Uint8Array(Float32Array.from(values).buffer) });
    const file = path.join(dir, `${variant}-${Math.random().toString(36).slice(2)}.gguf`);
    return writeGguf(file, meta, tensors);
  } finally {
    src.close();
  }
}

function configOf(file: string) {
  const g = readGguf(file);
  try {
    return modelConfigFromGguf(g);
  } finally {
    g.close();
  }
}

async function loadError(file: string): Promise<string> {
  try {
    const e = await loadEngine(file, { threads: 1, poolBytes: 2 * 2 ** 20 });
    e.destroy();
    return 'loaded';
  } catch (err) {
    return (err as { code?: string }).code ?? String(err);
  }
}

describe('rope scaling metadata, as llama.cpp reads it', () => {
  it('a factor without a type is linear (llama.cpp defaults the type to "linear"); the old rope.scale_linear key counts too', () => {
    const noType = rewrite('llama-linear', { 'llama.rope.scaling.type': undefined });
    expect(configOf(noType).ropeScaling).toMatchObject({ type: 'linear', factor: 4 });
    const old = rewrite('llama-linear', { 'llama.rope.scaling.type': undefined, 'llama.rope.scaling.factor': undefined, 'llama.rope.scale_linear': gv.f32(2) });
    expect(configOf(old).ropeScaling).toMatchObject({ type: 'linear', factor: 2 });
    expect(ropeScalingFrom(configOf(old).ropeScaling, old)).toMatchObject({ freqScale: 0.5, extFactor: 0, attnFactor: 1 });
  });

  it('type "none" ignores the factor; factor 0 or absent means 1 (plain RoPE: no scaling passed to the op)', () => {
    expect(ropeScalingFrom({ type: 'none', factor: 8, originalContext: 2048, attnFactor: 1 }, 'x')).toBeUndefined();
    expect(configOf(rewrite('llama-linear', { 'llama.rope.scaling.factor': gv.f32(0) })).ropeScaling.factor).toBe(1);
    expect(ropeScalingFrom({ type: 'linear', factor: 1, originalContext: 2048, attnFactor: 1 }, 'x')).toBeUndefined();
  });

  it('YaRN: ext 1, attn factor mscale(f)/(1 + 0.1 ln f) in f32 (≈ 1), betas 32/1 whatever yarn_beta_* say, original context from the key or context_length', () => {
    const y = ropeScalingFrom({ type: 'yarn', factor: 4, originalContext: 512, attnFactor: 1 }, 'x')!;
    expect(y).toMatchObject({ freqScale: 0.25, extFactor: 1, betaFast: 32, betaSlow: 1, nCtxOrig: 512 });
    expect(Math.abs(y.attnFactor - 1)).toBeLessThan(1e-6);
    expect(ropeScalingFrom({ type: 'yarn', factor: 4, originalContext: 512, attnFactor: 0.5 }, 'x')!.attnFactor).toBeCloseTo(0.5, 6);
    const q3 = configOf(ensureArchVariantModel('qwen3-yarn', { dataDir: TEST_DATA_DIR, weightType: 'f16' }));
    expect(ropeScalingFrom(q3.ropeScaling, 'x')).toMatchObject({ betaFast: 32, betaSlow: 1 });
    const noOrig = rewrite('llama-yarn', { 'llama.rope.scaling.original_context_length': undefined });
    expect(configOf(noOrig).ropeScaling.originalContext).toBe(2048);
  });
});

describe('files the engine refuses (KVT_ERR_ENGINE_UNSUPPORTED_MODEL)', () => {
  it('rope scaling types other than none/linear/yarn (longrope needs per-context factor tensors)', async () => {
    expect(await loadError(rewrite('llama-linear', { 'llama.rope.scaling.type': gv.str('longrope') }))).toBe('KVT_ERR_ENGINE_UNSUPPORTED_MODEL');
  });
  it('rope_freqs.weight in a qwen2/qwen3 file (llama.cpp\'s graphs for them take no factors and its loader refuses the extra tensor)', async () => {
    const file = rewrite('qwen3', {}, { addF32: { 'rope_freqs.weight': new Float32Array(16).fill(2) } });
    expect(await loadError(file)).toBe('KVT_ERR_ENGINE_UNSUPPORTED_MODEL');
  });
  it('a qwen3 file without its q/k norms is a metadata error, not a silent plain-attention run', async () => {
    const file = rewrite('qwen3', {}, { dropTensors: ['blk.0.attn_q_norm.weight'] });
    expect(await loadError(file)).toMatch(/^KVT_ERR_GGUF/);
  });
  it('the unchanged files load', async () => {
    for (const v of ['llama31', 'qwen3', 'llama-yarn'] as const) {
      expect(await loadError(ensureArchVariantModel(v, { dataDir: TEST_DATA_DIR, weightType: 'f16' }))).toBe('loaded');
    }
  });
});
