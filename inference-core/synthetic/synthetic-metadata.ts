/**
 * The leading GGUF metadata of the arch-variant and DeepSeek synthetic files,
 * in the order both write it (the order is part of the files' bytes).
 */
import { gv, type GgufValue } from '../gguf/index.ts';

export interface BaseShape {
  nLayers: number;
  ctxLen: number;
  dModel: number;
  ffnDim: number;
  nHeads: number;
  nKvHeads: number;
  ropeTheta: number;
  rmsEps: number;
}

/** general.* keys, then `arch`.block_count … layer_norm_rms_epsilon. */
export function baseModelMetadata(arch: string, name: string, fileType: number, s: BaseShape): Array<[string, GgufValue]> {
  return [
    ['general.architecture', gv.str(arch)],
    ['general.name', gv.str(name)],
    ['general.file_type', gv.u32(fileType)],
    ['general.quantization_version', gv.u32(2)],
    [`${arch}.block_count`, gv.u32(s.nLayers)],
    [`${arch}.context_length`, gv.u32(s.ctxLen)],
    [`${arch}.embedding_length`, gv.u32(s.dModel)],
    [`${arch}.feed_forward_length`, gv.u32(s.ffnDim)],
    [`${arch}.attention.head_count`, gv.u32(s.nHeads)],
    [`${arch}.attention.head_count_kv`, gv.u32(s.nKvHeads)],
    [`${arch}.rope.freq_base`, gv.f32(s.ropeTheta)],
    [`${arch}.attention.layer_norm_rms_epsilon`, gv.f32(s.rmsEps)],
  ];
}

/** A metadata entry under the architecture's prefix, `arch`.`key`. */
export function archKey(arch: string): (key: string, v: GgufValue) => [string, GgufValue] {
  return (key, v) => [`${arch}.${key}`, v];
}

/** The widths of the query and of the key/value projections of a shape with `headDim`-wide heads. */
export function projectionWidths(s: { nHeads: number; nKvHeads: number; headDim: number }): { qDim: number; kvDim: number } {
  return { qDim: s.nHeads * s.headDim, kvDim: s.nKvHeads * s.headDim };
}
