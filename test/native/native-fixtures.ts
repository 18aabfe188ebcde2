// Shared fixtures of the native tests: a seeded RNG and GGUF-layout weights.
import { GGML_TYPE, nativeAddon, type WeightDType } from '../../native/index.ts';

export const addon = nativeAddon();
export const ISAS = addon.info().isasAvailable as ('scalar' | 'avx2' | 'avx512')[];
export const DTYPES: WeightDType[] = ['f32', 'f16', 'bf16', 'q8_0'];

export function rng(seed: number): () => number {
  let s = seed >>> 0;
  return () => {
    s = (s + 0x6d2b79f5) >>> 0;
    let t = s;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

export function randomF32(n: number, seed: number, scale = 1): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = (r() * 2 - 1) * scale;
  return out;
}

/** Values on a 1/256 grid in [-2, 2]: exact in f16, so f16 pages hold exactly these numbers. */
export function gridValues(n: number, seed: number): Float32Array {
  const r = rng(seed);
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.round((r() * 4 - 2) * 256) / 256;
  return out;
}

export function rowBytes(dtype: WeightDType, cols: number): number {
  return dtype === 'f32' ? cols * 4 : dtype === 'q8_0' ? (cols / 32) * 34 : cols * 2;
}

/** values [rows][cols] → GGUF bytes of dtype, plus the exact f32 values those bytes hold. */
export function ggufWeight(dtype: WeightDType, rows: number, cols: number, seed: number): { bytes: Uint8Array; values: Float32Array } {
  const src = randomF32(rows * cols, seed);
  const bytes = new Uint8Array(rowBytes(dtype, cols) * rows);
  addon.quantize(bytes, src, GGML_TYPE[dtype], rows * cols);
  const values = new Float32Array(rows * cols);
  addon.dequantize(values, bytes, GGML_TYPE[dtype], rows * cols);
  return { bytes, values };
}

export function withIsa<T>(isa: string, fn: () => T): T {
  const before = addon.info().isa;
  addon.setIsa(isa);
  try {
    return fn();
  } finally {
    addon.setIsa(before);
  }
}

export function withThreads<T>(n: number, fn: () => T): T {
  const before = addon.info().threads;
  addon.setThreads(n);
  try {
    return fn();
  } finally {
    addon.setThreads(before);
  }
}

export function maxAbsDiff(a: Float32Array, b: Float32Array): number {
  let m = 0;
  for (let i = 0; i < a.length; i++) m = Math.max(m, Math.abs(a[i] - b[i]));
  return m;
}

export function bitsEqual(a: Float32Array, b: Float32Array): boolean {
  if (a.length !== b.length) return false;
  const x = new Uint32Array(a.buffer, a.byteOffset, a.length);
  const y = new Uint32Array(b.buffer, b.byteOffset, b.length);
  for (let i = 0; i < x.length; i++) if (x[i] !== y[i]) return false;
  return true;
}
