/**
 * GGML tensor types as GGUF tensor infos carry them. The "supported" ones are
 * those kvtier reads, writes, quantizes and dequantizes (byte-identical to
 * ggml: native/src/quant); the others are recognised by id so a file using
 * them is rejected with its type named instead of a vague "unknown type".
 */
export enum GgmlType {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
}

/**
 * Elements per block and bytes per block of the supported types (layouts:
 * native/src/quant/blocks.h). A row (ne[0]) is whole blocks.
 */
export const SUPPORTED_GGML_TYPES: ReadonlyMap<GgmlType, { blockElems: number; blockBytes: number }> = new Map([
  [GgmlType.F32, { blockElems: 1, blockBytes: 4 }],
  [GgmlType.F16, { blockElems: 1, blockBytes: 2 }],
  [GgmlType.BF16, { blockElems: 1, blockBytes: 2 }],
  // Q8_0: one f16 scale + 32 int8 quants per block of 32 elements.
  [GgmlType.Q8_0, { blockElems: 32, blockBytes: 34 }],
  // 32-element blocks: f16 scale (and min) + 4/5-bit quants
  [GgmlType.Q4_0, { blockElems: 32, blockBytes: 18 }],
  [GgmlType.Q4_1, { blockElems: 32, blockBytes: 20 }],
  [GgmlType.Q5_0, { blockElems: 32, blockBytes: 22 }],
  [GgmlType.Q5_1, { blockElems: 32, blockBytes: 24 }],
  [GgmlType.IQ4_NL, { blockElems: 32, blockBytes: 18 }],
  // 256-element super-blocks
  [GgmlType.Q2_K, { blockElems: 256, blockBytes: 84 }],
  [GgmlType.Q3_K, { blockElems: 256, blockBytes: 110 }],
  [GgmlType.Q4_K, { blockElems: 256, blockBytes: 144 }],
  [GgmlType.Q5_K, { blockElems: 256, blockBytes: 176 }],
  [GgmlType.Q6_K, { blockElems: 256, blockBytes: 210 }],
  [GgmlType.IQ4_XS, { blockElems: 256, blockBytes: 136 }],
]);

/**
 * Types a GGUF file may hold beyond the engine's weight types: I32 index
 * tables (deepseek4's ffn_gate_tid2eid hash-routing table) and MXFP4 (V4's
 * routed experts, read by the deepseek4 path only). The writer and reader
 * accept them; the generic engine's weight checks still refuse them.
 */
export const INDEX_GGML_TYPES: ReadonlyMap<GgmlType, { blockElems: number; blockBytes: number }> = new Map([
  [GgmlType.I32, { blockElems: 1, blockBytes: 4 }],
  // MXFP4 (E8M0 scale + 32 E2M1 nibbles): deepseek4's routed experts; only the deepseek4 path computes it
  [GgmlType.MXFP4, { blockElems: 32, blockBytes: 17 }],
]);

/** Block geometry of a type the GGUF reader/writer can store (weight or index type). */
export function ggmlStorageInfo(type: GgmlType): { blockElems: number; blockBytes: number } | undefined {
  return SUPPORTED_GGML_TYPES.get(type) ?? INDEX_GGML_TYPES.get(type);
}

/** Names of the supported types, for messages ("F32, F16, ..."). */
export function supportedGgmlTypeNames(): string {
  return [...SUPPORTED_GGML_TYPES.keys()].map(ggmlTypeName).join(', ');
}

/** Bits per weight of a supported type (Q4_K: 4.5). */
export function ggmlBitsPerWeight(type: GgmlType): number {
  const info = SUPPORTED_GGML_TYPES.get(type);
  if (!info) throw new Error(`ggml type ${ggmlTypeName(type)} has no size here`);
  return (info.blockBytes * 8) / info.blockElems;
}

export const Q8_0_BLOCK = 32;

export function ggmlTypeName(type: number): string {
  const name = (GgmlType as unknown as Record<number, string | undefined>)[type];
  return name ?? `unknown(${type})`;
}

export function isKnownGgmlType(type: number): boolean {
  return (GgmlType as unknown as Record<number, string | undefined>)[type] !== undefined;
}

/** Bytes a row-major tensor of `elements` elements of `type` occupies; throws for unsupported types. */
export function ggmlTensorBytes(type: GgmlType, elements: number): number {
  const info = SUPPORTED_GGML_TYPES.get(type);
  if (!info) throw new Error(`ggml type ${ggmlTypeName(type)} has no size here`);
  if (elements % info.blockElems !== 0) {
    throw new Error(`${elements} elements is not a multiple of the ${ggmlTypeName(type)} block of ${info.blockElems}`);
  }
  return (elements / info.blockElems) * info.blockBytes;
}
