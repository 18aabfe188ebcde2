// The CUDA backend's upload fallback for weight types it has no kernel for
// (native/cuda/host-dequantize.ts): GGUF blocks → ggml's dequantization →
// f16 bytes. Runs on the CPU (the fallback itself needs no GPU).
import { describe, expect, it } from 'vitest';

import { CUDA_NATIVE_WEIGHT_DTYPES, dequantizeToF16 } from '../../native/cuda/host-dequantize.ts';
import { GGML_TYPE, type WeightDType } from '../../native/index.ts';
import { addon, randomF32 } from './native-fixtures.ts';

describe('CUDA host dequantize fallback', () => {
  const cases: [WeightDType, number][] = [['q4_k', 144], ['q6_k', 210], ['q2_k', 84]];
  for (const [dtype, blockBytes] of cases) {
    it(`${dtype}: f16 bytes of the dequantized weight, row for row`, () => {
      const [rows, cols] = [3, 512];
      const src = randomF32(rows * cols, 5);
      const gguf = new Uint8Array((rows * cols / 256) * blockBytes);
      addon.quantize(gguf, src, GGML_TYPE[dtype], rows * cols);
      const f32 = new Float32Array(rows * cols);
      addon.dequantize(f32, gguf, GGML_TYPE[dtype], rows * cols);
      const want = new Uint8Array(rows * cols * 2);
      addon.quantize(want, f32, GGML_TYPE.f16, rows * cols);
      const got = dequantizeToF16(dtype, rows, cols, gguf);
      expect(got.byteLength).toBe(rows * cols * 2);
      expect(Buffer.from(got).equals(Buffer.from(want))).toBe(true);
      // and the values are the weight's (not a zero or garbage buffer)
      const back = new Float32Array(rows * cols);
      addon.dequantize(back, got, GGML_TYPE.f16, rows * cols);
      let err = 0;
      for (let i = 0; i < back.length; i++) err = Math.max(err, Math.abs(back[i] - src[i]));
      expect(err).toBeLessThan(0.5);
      expect(CUDA_NATIVE_WEIGHT_DTYPES.has(dtype)).toBe(false);
    });
  }

  it('refuses a byte count that is not the shape\'s with KVT_ERR_NATIVE_SHAPE', () => {
    expect(() => dequantizeToF16('q4_k', 2, 256, new Uint8Array(100))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
    expect(() => dequantizeToF16('q4_k', 2, 200, new Uint8Array(288))).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
  });
});
