/**
 * Every GGUF block type kvtier quantizes against ggml itself: the
 * libggml-base.so node-llama-cpp ships, called through Python's ctypes
 * (test/helpers/ggml-quant-types.py). Per type and per kind of input:
 *   our quantize bytes == ggml's quantize bytes, and
 *   ggml's dequantize of our bytes == our dequantize, bit for bit (Uint32 views);
 * embed / embedRef of a quantized table == dequantize of the chosen rows.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { GGML_TYPE, WEIGHT_BLOCK, type WeightDType } from '../../native/index.ts';
import { Xoshiro128 } from '../../inference-core/index.ts';
import { addon } from './native-fixtures.ts';

const LIB = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so');
const SCRIPT = path.resolve('test/helpers/ggml-quant-types.py');

/** Our dtype name → ggml's function-name spelling. */
const TYPES: [WeightDType, string][] = [
  ['q4_0', 'q4_0'], ['q4_1', 'q4_1'], ['q5_0', 'q5_0'], ['q5_1', 'q5_1'], ['iq4_nl', 'iq4_nl'],
  ['q2_k', 'q2_K'], ['q3_k', 'q3_K'], ['q4_k', 'q4_K'], ['q5_k', 'q5_K'], ['q6_k', 'q6_K'], ['iq4_xs', 'iq4_xs'],
];

const SUPER = 256;

/** Named input kinds, each a run of 256-value super-blocks. */
function inputKinds(): { name: string; x: Float32Array }[] {
  const rng = new Xoshiro128(20261203);
  const gauss = (blocks: number, std: number) => rng.fillNormal(new Float32Array(blocks * SUPER), 0, std);
  const kinds: { name: string; x: Float32Array }[] = [];
  kinds.push({ name: 'gaussian σ=1', x: gauss(48, 1) });
  kinds.push({ name: 'gaussian σ=0.02 (typical weights)', x: gauss(48, 0.02) });
  const uni = new Float32Array(32 * SUPER);
  for (let i = 0; i < uni.length; i++) uni[i] = rng.nextUnit() * 2 - 1;
  kinds.push({ name: 'uniform [-1, 1)', x: uni });
  kinds.push({ name: 'all zeros', x: new Float32Array(4 * SUPER) });
  kinds.push({ name: 'constant row', x: new Float32Array(4 * SUPER).fill(0.375) });
  kinds.push({ name: 'constant negative row', x: new Float32Array(4 * SUPER).fill(-1.25) });
  const outlier = gauss(32, 0.02);
  for (let b = 0; b < outlier.length / 32; b++) outlier[b * 32 + ((b * 7) % 32)] = b % 2 ? 1000 : -1000;
  kinds.push({ name: 'one huge outlier per 32-block', x: outlier });
  kinds.push({ name: 'tiny magnitudes (σ=1e-6)', x: gauss(16, 1e-6) });
  kinds.push({ name: 'subnormal-f16 scales (σ=1e-5)', x: gauss(16, 1e-5) });
  kinds.push({ name: 'large magnitudes (σ=3000)', x: gauss(16, 3000) });
  const neg = gauss(32, 1);
  for (let i = 0; i < neg.length; i++) neg[i] = -Math.abs(neg[i]) - 1e-3;
  kinds.push({ name: 'all negative', x: neg });
  const pos = gauss(16, 1);
  for (let i = 0; i < pos.length; i++) pos[i] = Math.abs(pos[i]);
  kinds.push({ name: 'all non-negative', x: pos });
  kinds.push({ name: '1e-30 scales', x: gauss(8, 1e-30) });
  kinds.push({ name: 'f32 subnormals (σ=1e-39)', x: gauss(8, 1e-39) });
  const wide = gauss(8, 1);
  for (let i = 0; i < wide.length; i++) wide[i] = wide[i]! * 10 ** ((i % 13) - 6); // 1e-6 .. 1e6 within each block
  kinds.push({ name: 'magnitudes spread over 12 decades within a block', x: wide });
  const mixed = gauss(32, 1);
  for (let b = 0; b < mixed.length / 32; b++) {
    const s = [0, 1e-8, 1e-3, 1, 50, 1e-30, 0.5, 7][b % 8]!;
    for (let j = 0; j < 32; j++) mixed[b * 32 + j]! *= s;
  }
  kinds.push({ name: 'block magnitudes mixed within a super-block (zero blocks included)', x: mixed });
  const ints = new Float32Array(16 * SUPER);
  for (let i = 0; i < ints.length; i++) ints[i] = (rng.nextU32() % 17) - 8; // exact ties for the rounding
  kinds.push({ name: 'small integers (rounding ties)', x: ints });
  return kinds;
}

const bytesOf = (t: WeightDType, n: number) => (n / WEIGHT_BLOCK[t].elems) * WEIGHT_BLOCK[t].bytes;
const firstDiff = (a: Uint8Array | Uint32Array, b: Uint8Array | Uint32Array) => a.findIndex((v, i) => v !== b[i]);

describe('block quantizers are identical to ggml', () => {
  const kinds = inputKinds();
  let dir = '';
  beforeAll(() => {
    expect(fs.existsSync(LIB)).toBe(true);
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-quant-'));
  });
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

  for (const kind of kinds) {
    it(`${kind.name}: quantize bytes and dequantize bits of every type`, () => {
      const { x } = kind;
      fs.writeFileSync(path.join(dir, 'in.f32'), new Uint8Array(x.buffer, x.byteOffset, x.byteLength));
      const ours = new Map<WeightDType, { q: Uint8Array; deq: Float32Array }>();
      for (const [t, g] of TYPES) {
        const q = new Uint8Array(bytesOf(t, x.length));
        addon.quantize(q, x, GGML_TYPE[t], x.length);
        const deq = new Float32Array(x.length);
        addon.dequantize(deq, q, GGML_TYPE[t], x.length);
        ours.set(t, { q, deq });
        fs.writeFileSync(path.join(dir, `ours-${g}.bin`), q);
      }
      const r = spawnSync('python3', [SCRIPT, LIB, dir, ...TYPES.map(([, g]) => g)], { encoding: 'buffer' });
      expect(r.error, 'python3 is needed (as for node-gyp)').toBeUndefined();
      expect(r.status, r.stderr?.toString()).toBe(0);
      const failures: string[] = [];
      for (const [t, g] of TYPES) {
        const mine = ours.get(t)!;
        const ref = new Uint8Array(fs.readFileSync(path.join(dir, `ggml-${g}.bin`)));
        const refDeq = new Float32Array(new Uint8Array(fs.readFileSync(path.join(dir, `deq-${g}.f32`))).buffer);
        expect(ref.length).toBe(mine.q.length);
        const qd = firstDiff(mine.q, ref);
        if (qd >= 0) failures.push(`${t}: quantize byte ${qd} (block ${Math.floor(qd / WEIGHT_BLOCK[t].bytes)}) ours ${mine.q[qd]} ggml ${ref[qd]}`);
        const dd = firstDiff(new Uint32Array(mine.deq.buffer), new Uint32Array(refDeq.buffer));
        if (dd >= 0) failures.push(`${t}: dequantize value ${dd} ours ${mine.deq[dd]} ggml ${refDeq[dd]}`);
      }
      expect(failures).toEqual([]);
    });
  }

  it('a quantization error stays within what the type can hold (not a stray layout)', () => {
    const x = new Xoshiro128(7).fillNormal(new Float32Array(16 * SUPER), 0, 1);
    // rms error bounds well above llama.cpp's published figures, far below a shuffled layout's ~1.4
    const bound: Partial<Record<WeightDType, number>> = {
      q2_k: 0.45, q3_k: 0.25, q4_0: 0.15, q4_1: 0.15, iq4_nl: 0.15, iq4_xs: 0.15, q4_k: 0.12, q5_0: 0.08, q5_1: 0.08, q5_k: 0.06, q6_k: 0.03,
    };
    for (const [t] of TYPES) {
      const q = new Uint8Array(bytesOf(t, x.length));
      addon.quantize(q, x, GGML_TYPE[t], x.length);
      const d = new Float32Array(x.length);
      addon.dequantize(d, q, GGML_TYPE[t], x.length);
      let se = 0;
      for (let i = 0; i < x.length; i++) se += (x[i]! - d[i]!) ** 2;
      expect(Math.sqrt(se / x.length), t).toBeLessThan(bound[t]!);
    }
  });
});

describe('quantize / dequantize / embed bindings', () => {
  it('refuse a count that is not a multiple of the block, naming the block', () => {
    for (const [t] of TYPES) {
      const qk = WEIGHT_BLOCK[t].elems;
      const n = qk + 16;
      expect(() => addon.quantize(new Uint8Array(4096), new Float32Array(n), GGML_TYPE[t], n)).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE', message: expect.stringContaining(`block of ${qk}`) }),
      );
      expect(() => addon.dequantize(new Float32Array(n), new Uint8Array(4096), GGML_TYPE[t], n)).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }),
      );
    }
  });

  it('refuse a type id with no quantizer (Q8_K, 99)', () => {
    for (const id of [15, 99]) {
      expect(() => addon.quantize(new Uint8Array(4096), new Float32Array(256), id, 256)).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }),
      );
    }
  });

  it('refuse buffers too small for the count', () => {
    expect(() => addon.quantize(new Uint8Array(143), new Float32Array(256), GGML_TYPE.q4_k, 256)).toThrow(
      expect.objectContaining({ code: 'KVT_ERR_NATIVE_SHAPE' }),
    );
  });

  for (const [t] of TYPES) {
    it(`${t}: embed and embedRef gather exactly the dequantized rows`, () => {
      const rows = 37;
      const cols = 512;
      const x = new Xoshiro128(99).fillNormal(new Float32Array(rows * cols), 0, 0.05);
      const table = new Uint8Array(bytesOf(t, rows * cols));
      addon.quantize(table, x, GGML_TYPE[t], rows * cols);
      const all = new Float32Array(rows * cols);
      addon.dequantize(all, table, GGML_TYPE[t], rows * cols);
      const tokens = Int32Array.from([0, 36, 5, 5, 17, 1]);
      const fast = new Float32Array(tokens.length * cols);
      const ref = new Float32Array(tokens.length * cols);
      addon.embed(fast, table, GGML_TYPE[t], rows, cols, tokens);
      addon.embedRef(ref, table, GGML_TYPE[t], rows, cols, tokens);
      const want = new Float32Array(tokens.length * cols);
      tokens.forEach((tok, i) => want.set(all.subarray(tok * cols, (tok + 1) * cols), i * cols));
      expect(firstDiff(new Uint32Array(fast.buffer), new Uint32Array(want.buffer))).toBe(-1);
      expect(firstDiff(new Uint32Array(ref.buffer), new Uint32Array(want.buffer))).toBe(-1);
      expect(() => addon.embed(fast, table, GGML_TYPE[t], rows, cols, Int32Array.from([rows]))).toThrow(
        expect.objectContaining({ code: 'KVT_ERR_NATIVE_TOKEN' }),
      );
    });
  }
});
