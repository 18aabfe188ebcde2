/**
 * Our f32 → Q8_0 / f16 / bf16 conversions against ggml's own code: the
 * libggml-base.so that node-llama-cpp ships, called through Python's ctypes
 * (python3 is already required by node-gyp to build the native addon).
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { Xoshiro128, f32ToBf16, f32ToF16, quantizeQ8_0 } from '../../inference-core/index.ts';

const LIB = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so');
const SCRIPT = path.resolve('test/helpers/ggml-quantize.py');

function inputs(): Float32Array {
  const blocks = 4096;
  const x = new Float32Array(blocks * 32);
  const rng = new Xoshiro128(12345);
  for (let b = 0; b < blocks; b++) {
    const block = x.subarray(b * 32, b * 32 + 32);
    const kind = b % 8;
    if (kind === 0) {
      // amax = 127 → d = 1: exact .5 ties exercise roundf (half away from zero)
      for (let j = 0; j < 32; j++) block[j] = (j - 16) + 0.5;
      block[0] = 127;
    } else if (kind === 1) {
      block.fill(0);
      if (b % 16 === 1) block[5] = -0; // all-zero block, one negative zero
    } else {
      // Normal draws at magnitudes from subnormal-f16 to near the f16 maximum.
      const scale = [1e-7, 3e-5, 0.02, 1, 37, 4000, 60000][kind - 1] ?? 1;
      rng.fillNormal(block, 0, scale);
      if (kind === 7) for (let j = 0; j < 32; j++) block[j] = Math.max(-65519, Math.min(65519, block[j]));
    }
  }
  return x;
}

describe('conversions are bit-identical to ggml', () => {
  it('Q8_0 (quantize_row_q8_0_ref), f16 (ggml_fp32_to_fp16_row), bf16 (ggml_fp32_to_bf16_row_ref)', () => {
    expect(fs.existsSync(LIB)).toBe(true);
    const x = inputs();
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-q8-'));
    try {
      const inFile = path.join(dir, 'in.f32');
      fs.writeFileSync(inFile, new Uint8Array(x.buffer));
      const r = spawnSync('python3', [SCRIPT, LIB, inFile], { maxBuffer: 64 << 20 });
      expect(r.error, 'python3 is needed (as for node-gyp)').toBeUndefined();
      expect(r.status, r.stderr?.toString()).toBe(0);
      const out = r.stdout as Buffer;
      const q8Len = (x.length / 32) * 34;
      const refQ8 = out.subarray(0, q8Len);
      const refF16 = out.subarray(q8Len, q8Len + x.length * 2);
      const refBf16 = out.subarray(q8Len + x.length * 2);
      const ours = { q8: Buffer.from(quantizeQ8_0(x)), f16: Buffer.from(f32ToF16(x).buffer), bf16: Buffer.from(f32ToBf16(x).buffer) };
      const firstDiff = (a: Buffer, b: Buffer) => a.findIndex((v, i) => v !== b[i]);
      expect(firstDiff(ours.q8, refQ8)).toBe(-1);
      expect(ours.q8.length).toBe(refQ8.length);
      expect(firstDiff(ours.f16, refF16)).toBe(-1);
      expect(firstDiff(ours.bf16, refBf16)).toBe(-1);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});
