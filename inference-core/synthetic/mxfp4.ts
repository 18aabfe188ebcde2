/**
 * MXFP4 quantization as ggml's quantize_row_mxfp4_ref writes it (llama-quantize's
 * MXFP4_MOE experts): per 32 values one E8M0 exponent e = ⌊log2 amax⌋ − 2 + 127
 * (0 when all are 0), scale d = 2^(e−128) (ggml_e8m0_to_fp32_half), then for each
 * value the index of the nearest of the doubled E2M1 values (first on ties, the
 * error taken in f32 as ggml does), values j and j+16 packed low|high in byte j.
 * Its twin, dequantizeMxfp4, is in engine/deepseek4-weights.ts.
 */
const KVALUES = [0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12];
const f = Math.fround;

function bestIndex(x: number, d: number): number {
  let best = 0;
  let bestErr = Math.abs(f(KVALUES[0]! * d - x));
  for (let i = 1; i < 16; i++) {
    const err = Math.abs(f(KVALUES[i]! * d - x));
    if (err < bestErr) {
      best = i;
      bestErr = err;
    }
  }
  return best;
}

/** f32 values (whole blocks of 32) → MXFP4 bytes (17 per block). */
export function quantizeMxfp4(x: Float32Array): Uint8Array {
  if (x.length % 32 !== 0) throw new RangeError(`quantizeMxfp4: ${x.length} values are not whole blocks of 32`);
  const out = new Uint8Array((x.length / 32) * 17);
  for (let b = 0; b < x.length / 32; b++) {
    let amax = 0;
    for (let j = 0; j < 32; j++) amax = Math.max(amax, Math.abs(x[b * 32 + j]!));
    // log2f in f32, as ggml computes it
    const e = amax > 0 ? (Math.floor(f(Math.log2(amax))) - 2 + 127) & 0xff : 0;
    const d = e < 2 ? 2 ** (-128 + e) : 2 ** (e - 128);
    out[b * 17] = e;
    for (let j = 0; j < 16; j++) out[b * 17 + 1 + j] = bestIndex(x[b * 32 + j]!, d) | (bestIndex(x[b * 32 + 16 + j]!, d) << 4);
  }
  return out;
}
