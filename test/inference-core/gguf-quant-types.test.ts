/**
 * Every supported GGUF weight type through the GGUF layer: the geometry
 * matches ggml's own (ggml_blck_size / ggml_type_size of libggml-base), the
 * writer writes each type, the reader reads it back with the right byte size,
 * and quantize() / dequantize() round-trip through the native quantizers.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GgmlType,
  GgufError,
  SUPPORTED_GGML_TYPES,
  Xoshiro128,
  dequantize,
  f32ToBf16,
  f32ToF16,
  ggmlTypeName,
  gv,
  quantize,
  quantizeQ8_0,
  readGguf,
  writeGguf,
} from '../../inference-core/index.ts';

const LIB = path.resolve('node_modules/@node-llama-cpp/linux-x64/bins/linux-x64/libggml-base.so');
const TYPES = [...SUPPORTED_GGML_TYPES.keys()];

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-gguf-types-'));
});
afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));

describe('GGUF weight types', () => {
  it('block geometry of every supported type is ggml\'s', () => {
    const py = [
      'import ctypes, sys',
      'lib = ctypes.CDLL(sys.argv[1])',
      'lib.ggml_blck_size.restype = ctypes.c_int64',
      'lib.ggml_type_size.restype = ctypes.c_size_t',
      'print(" ".join("%d:%d:%d" % (t, lib.ggml_blck_size(t), lib.ggml_type_size(t)) for t in map(int, sys.argv[2:])))',
    ].join('\n');
    const r = spawnSync('python3', ['-c', py, LIB, ...TYPES.map(String)], { encoding: 'utf8' });
    expect(r.status, r.stderr).toBe(0);
    const ggml = new Map(r.stdout.trim().split(' ').map((s) => { const [t, e, b] = s.split(':').map(Number); return [t!, { blockElems: e!, blockBytes: b! }]; }));
    for (const t of TYPES) expect(SUPPORTED_GGML_TYPES.get(t), ggmlTypeName(t)).toEqual(ggml.get(t));
    expect(TYPES.length).toBe(15);
  });

  it('writes a tensor of every type; reads each back with its byte size, bytes and values', () => {
    const cols = 512;
    const rows = 3;
    const x = new Xoshiro128(4242).fillNormal(new Float32Array(rows * cols), 0, 0.05);
    const tensors = TYPES.map((type) => ({ name: `w.${ggmlTypeName(type)}`, type, dims: [cols, rows], data: quantize(type, x) }));
    const norm = new Float32Array(cols).fill(1);
    const file = writeGguf(path.join(dir, 'all-types.gguf'), [['general.architecture', gv.str('llama')]], [
      ...tensors,
      { name: 'norm', type: GgmlType.F32, dims: [cols], data: norm },
    ]);
    const g = readGguf(file);
    try {
      for (const t of tensors) {
        const info = SUPPORTED_GGML_TYPES.get(t.type)!;
        const got = g.tensor(t.name);
        expect(got.type).toBe(t.type);
        expect(got.dims).toEqual([cols, rows]);
        expect(got.byteLength, t.name).toBe(((rows * cols) / info.blockElems) * info.blockBytes);
        expect(Buffer.from(got.data).equals(Buffer.from(t.data)), t.name).toBe(true);
        const back = dequantize(t.type, got.data, rows * cols);
        const rms = Math.sqrt(back.reduce((s, v, i) => s + (v - x[i]!) ** 2, 0) / back.length);
        expect(rms, t.name).toBeLessThan(0.05 * 0.45); // Q2_K, the coarsest, stays under 0.45 σ
      }
      expect(Array.from(new Float32Array(g.tensor('norm').data.slice().buffer))).toEqual(Array.from(norm));
    } finally {
      g.close();
    }
  });

  it('a tensor of a block type cut short is reported out of bounds (the size is the type\'s)', () => {
    for (const type of [GgmlType.Q6_K, GgmlType.Q4_0, GgmlType.IQ4_XS]) {
      const x = new Float32Array(256 * 2).fill(0.5);
      const file = writeGguf(path.join(dir, `short-${type}.gguf`), [['general.architecture', gv.str('llama')]], [
        { name: 'w', type, dims: [256, 2], data: quantize(type, x) },
      ]);
      const g = readGguf(file);
      const end = g.tensor('w').fileOffset + g.tensor('w').byteLength;
      g.close();
      fs.writeFileSync(file, fs.readFileSync(file).subarray(0, end - 1));
      expect(() => readGguf(file)).toThrow(expect.objectContaining({ code: 'KVT_ERR_GGUF_TENSOR_OUT_OF_BOUNDS' }));
    }
  });

  it('the writer refuses a row that is not whole blocks', () => {
    expect(() =>
      writeGguf(path.join(dir, 'bad-row.gguf'), [], [{ name: 'w', type: GgmlType.Q4_K, dims: [128, 2], data: new Uint8Array(144) }]),
    ).toThrow(GgufError);
  });

  it('quantize keeps the TS paths for F32/F16/BF16/Q8_0 and refuses partial blocks and unsupported types', () => {
    const x = new Xoshiro128(5).fillNormal(new Float32Array(256), 0, 1);
    expect(Buffer.from(quantize(GgmlType.Q8_0, x)).equals(Buffer.from(quantizeQ8_0(x)))).toBe(true);
    expect(Buffer.from(quantize(GgmlType.F16, x)).equals(Buffer.from(f32ToF16(x).buffer))).toBe(true);
    expect(Buffer.from(quantize(GgmlType.BF16, x)).equals(Buffer.from(f32ToBf16(x).buffer))).toBe(true);
    expect(Array.from(dequantize(GgmlType.F32, quantize(GgmlType.F32, x), 256))).toEqual(Array.from(x));
    expect(() => quantize(GgmlType.Q4_K, x.subarray(0, 224))).toThrow(/blocks of 256/);
    expect(() => quantize(GgmlType.IQ2_XXS, x)).toThrow(/IQ2_XXS/);
    expect(() => dequantize(GgmlType.Q6_K, new Uint8Array(209), 256)).toThrow(/210 bytes/);
  });
});
