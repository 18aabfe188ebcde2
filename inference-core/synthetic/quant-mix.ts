/**
 * Per-tensor weight types of a synthetic model, chosen the way llama.cpp's
 * llama-quantize does for the same file type (llama_tensor_get_type, no
 * imatrix, no overrides), so a synthetic `q4_k_m` model has the layout of a
 * real Q4_K_M download:
 *
 *   - 1-D tensors and *_norm.weight stay F32 (llama.cpp quantizes only 2-D+);
 *   - output.weight — or token_embd.weight when the embeddings are tied (no
 *     output.weight) — is Q6_K for every quantized type but Q8_0, and Q8_0 if
 *     its rows are not whole blocks of the file's type;
 *   - q4_k_m / q5_k_m: attn_v.weight and ffn_down.weight are Q6_K on the
 *     layers use_more_bits() picks (first 1/8, last 1/8, every third between);
 *     everything else is the file's base type (Q4_K / Q5_K; token_embd too);
 *   - a row length that is not a multiple of the chosen type's block falls
 *     back like llama.cpp's tensor_type_fallback: Q4_K → Q5_0, Q5_K → Q5_1,
 *     Q6_K → Q8_0, Q2_K/Q3_K → Q4_0, IQ4_XS → IQ4_NL, then F16 if even that
 *     block does not divide the row (a 32-block type goes straight to F16).
 *
 * f32 / f16 / bf16 / q8_0 keep their old meaning: every matrix in that type.
 */
import { GgmlType, SUPPORTED_GGML_TYPES } from '../gguf/index.ts';
import type { SyntheticWeightType } from './synthetic-specs.ts';

export const SYNTHETIC_WEIGHT_TYPES: readonly SyntheticWeightType[] = ['f32', 'f16', 'bf16', 'q8_0', 'q4_0', 'q4_k_m', 'q5_k_m', 'q6_k'];

/** general.file_type values (llama_ftype) of each synthetic weight type. */
export const SYNTHETIC_FILE_TYPE: Record<SyntheticWeightType, number> = {
  f32: 0, f16: 1, q4_0: 2, q8_0: 7, q4_k_m: 15, q5_k_m: 17, q6_k: 18, bf16: 32,
};

/** The base type of each file type (llama.cpp's default_type). */
const BASE: Record<SyntheticWeightType, GgmlType> = {
  f32: GgmlType.F32, f16: GgmlType.F16, bf16: GgmlType.BF16, q8_0: GgmlType.Q8_0,
  q4_0: GgmlType.Q4_0, q4_k_m: GgmlType.Q4_K, q5_k_m: GgmlType.Q5_K, q6_k: GgmlType.Q6_K,
};

const UNQUANTIZED = new Set([GgmlType.F32, GgmlType.F16, GgmlType.BF16]);

/** llama.cpp's use_more_bits: first and last eighth of the layers, and every third layer between. */
export function useMoreBits(iLayer: number, nLayers: number): boolean {
  const e = Math.trunc(nLayers / 8);
  return iLayer < e || iLayer >= Math.trunc((7 * nLayers) / 8) || (iLayer - e) % 3 === 2;
}

function blockOf(type: GgmlType): number {
  return SUPPORTED_GGML_TYPES.get(type)!.blockElems;
}

/** llama.cpp's tensor_type_fallback: the type a row of `cols` values gets when `type`'s block does not divide it. */
export function fallback(cols: number, type: GgmlType): GgmlType {
  if (cols % blockOf(type) === 0) return type;
  const to: Partial<Record<GgmlType, GgmlType>> = {
    [GgmlType.Q2_K]: GgmlType.Q4_0, [GgmlType.Q3_K]: GgmlType.Q4_0, [GgmlType.Q4_K]: GgmlType.Q5_0,
    [GgmlType.Q5_K]: GgmlType.Q5_1, [GgmlType.Q6_K]: GgmlType.Q8_0, [GgmlType.IQ4_XS]: GgmlType.IQ4_NL,
  };
  const next = to[type] ?? type; // 32-block types have nothing smaller to demote to
  return cols % blockOf(next) === 0 ? next : GgmlType.F16;
}

/**
 * The GGML type of each tensor (name → type), in file order. `dims` are
 * GGUF dims (ne0 = row length first).
 */
export function syntheticTensorTypes(weightType: SyntheticWeightType, tensors: ReadonlyArray<{ name: string; dims: readonly number[] }>): Map<string, GgmlType> {
  const base = BASE[weightType];
  const out = new Map<string, GgmlType>();
  const tied = !tensors.some((t) => t.name === 'output.weight');
  const nAttnV = tensors.filter((t) => t.name.includes('attn_v.weight')).length;
  const nFfnDown = tensors.filter((t) => t.name.includes('ffn_down')).length;
  let iAttnV = 0;
  let iFfnDown = 0;
  const moreBitsMix = weightType === 'q4_k_m' || weightType === 'q5_k_m';
  for (const t of tensors) {
    const cols = t.dims[0] ?? 1;
    if (t.dims.length < 2 || !t.name.endsWith('weight') || t.name.includes('_norm.weight')) {
      out.set(t.name, GgmlType.F32);
      continue;
    }
    if (UNQUANTIZED.has(base)) {
      out.set(t.name, base);
      continue;
    }
    let type = base;
    if (t.name === 'output.weight' || (tied && t.name === 'token_embd.weight')) {
      if (cols % blockOf(base) !== 0) type = GgmlType.Q8_0;
      else if (base !== GgmlType.Q8_0) type = GgmlType.Q6_K;
    } else if (t.name.includes('attn_v.weight')) {
      if (moreBitsMix && useMoreBits(iAttnV, nAttnV)) type = GgmlType.Q6_K;
      iAttnV++;
    } else if (t.name.includes('ffn_down')) {
      if (moreBitsMix && useMoreBits(iFfnDown, nFfnDown)) type = GgmlType.Q6_K;
      iFfnDown++;
    }
    out.set(t.name, fallback(cols, type));
  }
  return out;
}
