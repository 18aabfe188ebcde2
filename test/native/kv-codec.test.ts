// KV block codecs (ops/kv-codec.*): per-ISA decoder vs its reference twin bit
// for bit (every codec, f16 and f32 pages, kv and mla shapes, head dims that
// are not a multiple of 8 or 32, odd value counts for int4); the decoded
// values within each codec's stated error of the originals; stored sizes;
// non-finite input refused; wrong lengths a typed error.
import { describe, expect, it } from 'vitest';

import { f16ToF32, f32ToF16 } from './kv-codec-fixtures.ts';
import { ISAS, addon, randomF32, withIsa } from './native-fixtures.ts';

const CODECS = { int8: 1, fp8: 2, int4: 3 } as const;
type Shape = { mla: boolean; layers: number; kvHeads: number; headDim: number; tokens: number };
const SHAPES: Shape[] = [
  { mla: false, layers: 2, kvHeads: 2, headDim: 16, tokens: 64 }, // synthetic:tiny
  { mla: false, layers: 1, kvHeads: 3, headDim: 48, tokens: 64 }, // V groups of 32 + 16
  { mla: false, layers: 1, kvHeads: 1, headDim: 33, tokens: 5 }, // odd rows: int4 rows start mid-byte
  { mla: true, layers: 2, kvHeads: 1, headDim: 48, tokens: 64 }, // deepseek-tiny latent (32 + 16)
  { mla: true, layers: 1, kvHeads: 1, headDim: 576, tokens: 64 }, // DeepSeek-V3 latent (512 + 64)
];

function args(codec: number, dtype: 'f32' | 'f16', s: Shape): [number, number, number, number, number, number, number] {
  return [codec, dtype === 'f32' ? 0 : 1, s.mla ? 1 : 0, s.layers, s.kvHeads, s.headDim, s.tokens];
}

/** Values with a different magnitude per channel (as K has) and a few outliers. */
function kvValues(s: Shape, seed: number): Float32Array {
  const n = (s.mla ? 1 : 2) * s.layers * s.kvHeads * s.tokens * s.headDim;
  const x = randomF32(n, seed);
  for (let i = 0; i < n; i++) x[i] *= 0.05 + (i % s.headDim) * 0.1;
  for (let i = 7; i < n; i += 97) x[i] *= 8;
  return x;
}

function toPage(x: Float32Array, dtype: 'f32' | 'f16'): Uint8Array {
  if (dtype === 'f32') return new Uint8Array(x.slice().buffer);
  const h = new Uint16Array(x.length);
  for (let i = 0; i < x.length; i++) h[i] = f32ToF16(x[i]);
  return new Uint8Array(h.buffer);
}

function fromPage(b: Uint8Array, dtype: 'f32' | 'f16'): Float32Array {
  if (dtype === 'f32') return new Float32Array(b.buffer, b.byteOffset, b.byteLength / 4);
  const h = new Uint16Array(b.buffer, b.byteOffset, b.byteLength / 2);
  return Float32Array.from(h, f16ToF32);
}

/** Largest |value| sharing each value's scale: its channel over the block's tokens, or (int4 V) its 32 of a row. */
function scaleAmax(x: Float32Array, s: Shape, codec: number): Float32Array {
  const T = s.tokens, D = s.headDim, out = new Float32Array(x.length);
  const matrices = (s.mla ? 1 : 2) * s.layers * s.kvHeads;
  for (let m = 0; m < matrices; m++) {
    const base = m * T * D;
    const grouped = codec === 3 && !s.mla && Math.floor(m / s.kvHeads) % 2 === 1;
    for (let t = 0; t < T; t++) {
      for (let d = 0; d < D; d++) {
        let a = 0;
        if (grouped) for (let e = d - (d % 32); e < Math.min(D, d - (d % 32) + 32); e++) a = Math.max(a, Math.abs(x[base + t * D + e]));
        else for (let u = 0; u < T; u++) a = Math.max(a, Math.abs(x[base + u * D + d]));
        out[base + t * D + d] = a;
      }
    }
  }
  return out;
}

describe('kv block codecs (native)', () => {
  for (const [name, codec] of Object.entries(CODECS)) {
    for (const dtype of ['f16', 'f32'] as const) {
      it(`${name}, ${dtype} pages: every ISA's decoder == the reference twin, bit for bit; error within the codec's bound`, () => {
        for (const [k, s] of SHAPES.entries()) {
          const x = kvValues(s, 11 + k);
          const page = toPage(x, dtype);
          const a = args(codec, dtype, s);
          const packed = new Uint8Array(addon.kvCodecBytes(...a));
          expect(addon.kvEncode(packed, page, ...a)).toBe(true);
          const ref = new Uint8Array(page.byteLength);
          addon.kvDecodeRef(ref, packed, ...a);
          for (const isa of ISAS) {
            const fast = new Uint8Array(page.byteLength);
            withIsa(isa, () => addon.kvDecode(fast, packed, ...a));
            expect(Buffer.from(fast).equals(Buffer.from(ref)), `${isa} ${JSON.stringify(s)}`).toBe(true);
          }
          const original = fromPage(page, dtype);
          const decoded = fromPage(ref, dtype);
          const amax = scaleAmax(original, s, codec);
          let worst = 0;
          for (let i = 0; i < original.length; i++) {
            const err = Math.abs(decoded[i] - original[i]);
            // int8/int4: half a step of amax/127 (amax/7), scale rounded up to f16; fp8: 3 mantissa bits (2⁻⁴
            // relative) or, below e4m3's smallest normal, half its subnormal step; then the f16 page's rounding.
            const step = codec === 1 ? amax[i] / 127 : codec === 3 ? amax[i] / 7 : 0;
            const bound =
              (codec === 2 ? Math.max(Math.abs(original[i]) / 16, (amax[i] / 448) * 2 ** -10) : step * 0.5 * (1 + 2 ** -10)) +
              Math.abs(decoded[i]) * (dtype === 'f16' ? 2 ** -11 : 2 ** -24) +
              1e-30;
            worst = Math.max(worst, err / bound);
          }
          expect(worst, JSON.stringify(s)).toBeLessThanOrEqual(1);
        }
      });
    }
  }

  it('stored size: int8 and fp8 0.516 of f16 pages, int4 0.27..0.28 (64 tokens)', () => {
    const s = SHAPES[0];
    const raw = 2 * s.layers * s.kvHeads * s.tokens * s.headDim * 2;
    expect(addon.kvCodecBytes(...args(1, 'f16', s)) / raw).toBeCloseTo(0.5156, 3);
    expect(addon.kvCodecBytes(...args(2, 'f16', s)) / raw).toBeCloseTo(0.5156, 3);
    const int4 = addon.kvCodecBytes(...args(3, 'f16', s)) / raw;
    expect(int4).toBeGreaterThan(0.26);
    expect(int4).toBeLessThan(0.3);
  });

  it('a channel of zeros decodes to zeros; an infinite or NaN value is refused (encode returns false)', () => {
    const s: Shape = { mla: true, layers: 1, kvHeads: 1, headDim: 16, tokens: 4 };
    const x = new Float32Array(64);
    for (let i = 0; i < 64; i++) x[i] = i % 16 === 3 ? 0 : Math.cos(i);
    for (const codec of [1, 2, 3]) {
      const a = args(codec, 'f32', s);
      const packed = new Uint8Array(addon.kvCodecBytes(...a));
      expect(addon.kvEncode(packed, toPage(x, 'f32'), ...a)).toBe(true);
      const out = new Uint8Array(256);
      addon.kvDecode(out, packed, ...a);
      const y = fromPage(out, 'f32');
      for (let t = 0; t < 4; t++) expect(y[t * 16 + 3]).toBe(0);
      for (const bad of [Infinity, NaN]) {
        const z = x.slice();
        z[17] = bad;
        expect(addon.kvEncode(packed, toPage(z, 'f32'), ...a)).toBe(false);
      }
    }
  });

  it('fp8 codes every e4m3 magnitude exactly: values on the e4m3 grid times a power-of-two scale come back unchanged', () => {
    const s: Shape = { mla: true, layers: 1, kvHeads: 1, headDim: 1, tokens: 127 };
    // Column amax 448 → scale exactly 1; values 0 … 448 on e4m3's grid (subnormals included).
    const grid: number[] = [];
    for (let b = 0; b < 0x7f; b++) grid.push(b < 8 ? (b / 8) * 2 ** -6 : 2 ** ((b >> 3) - 7) * (1 + (b & 7) / 8));
    const x = Float32Array.from(grid);
    const a = args(2, 'f32', s);
    const packed = new Uint8Array(addon.kvCodecBytes(...a));
    expect(addon.kvEncode(packed, toPage(x, 'f32'), ...a)).toBe(true);
    const out = new Uint8Array(x.byteLength);
    addon.kvDecode(out, packed, ...a);
    expect(Array.from(fromPage(out, 'f32'))).toEqual(grid.map((v) => Math.fround(v)));
  });

  it('wrong buffer lengths or shape fields are a typed error, never a stray write', () => {
    const s = SHAPES[0];
    const a = args(1, 'f16', s);
    const n = addon.kvCodecBytes(...a);
    expect(() => addon.kvDecode(new Uint8Array(10), new Uint8Array(n), ...a)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
    expect(() => addon.kvEncode(new Uint8Array(n - 1), new Uint8Array(8192), ...a)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }));
    expect(() => addon.kvCodecBytes(4, 1, 0, 1, 1, 16, 64)).toThrow(expect.objectContaining({ code: 'KVT_ERR_NATIVE_ARG' }));
  });
});
