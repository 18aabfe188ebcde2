import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  GgmlType,
  GgufError,
  dequantizeQ8_0,
  f16BitsToF32,
  f32ToBf16,
  f32ToF16,
  f32ToF16Bits,
  gv,
  quantizeQ8_0,
  readGguf,
  writeGguf,
  ensureSyntheticModel,
  type GgufValue,
} from '../../inference-core/index.ts';
import { llamaCppTokenize } from '../helpers/llamacpp-tokenize.ts';

let dir: string;
beforeAll(() => {
  dir = fs.mkdtempSync(path.join(os.tmpdir(), 'kvtier-gguf-'));
});
afterAll(() => {
  fs.rmSync(dir, { recursive: true, force: true });
});

/**
 * An independent, hand-rolled GGUF encoder (not our writer), so reader tests
 * do not just check the writer against itself, and so we can write what the
 * writer refuses to: other versions, bad types, bad offsets.
 */
function rawGguf(opts: {
  magic?: number;
  version?: number;
  kv?: Array<{ key: string; type: number; body: Buffer }>;
  tensors?: Array<{ name: string; dims: number[]; type: number; offset: number }>;
  data?: Buffer;
  alignment?: number;
}): Buffer {
  const parts: Buffer[] = [];
  const u32 = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); parts.push(b); };
  const u64 = (v: number) => { const b = Buffer.alloc(8); b.writeBigUInt64LE(BigInt(v)); parts.push(b); };
  const str = (s: string) => { const b = Buffer.from(s, 'utf8'); u64(b.length); parts.push(b); };
  u32(opts.magic ?? 0x46554747);
  u32(opts.version ?? 3);
  u64(opts.tensors?.length ?? 0);
  u64(opts.kv?.length ?? 0);
  for (const kv of opts.kv ?? []) { str(kv.key); u32(kv.type); parts.push(kv.body); }
  for (const t of opts.tensors ?? []) { str(t.name); u32(t.dims.length); for (const d of t.dims) u64(d); u32(t.type); u64(t.offset); }
  let head = Buffer.concat(parts);
  const align = opts.alignment ?? 32;
  const pad = (align - (head.length % align)) % align;
  head = Buffer.concat([head, Buffer.alloc(pad)]);
  return Buffer.concat([head, opts.data ?? Buffer.alloc(0)]);
}
const u32Body = (v: number) => { const b = Buffer.alloc(4); b.writeUInt32LE(v); return b; };
const strBody = (s: string) => { const b = Buffer.from(s); const l = Buffer.alloc(8); l.writeBigUInt64LE(BigInt(b.length)); return Buffer.concat([l, b]); };

function expectGgufError(fn: () => unknown, code: string, file: string, field: RegExp | string): GgufError {
  let caught: unknown;
  try {
    fn();
  } catch (err) {
    caught = err;
  }
  expect(caught).toBeInstanceOf(GgufError);
  const e = caught as GgufError;
  expect(e.code).toBe(code);
  expect(e.file).toBe(file);
  if (typeof field === 'string') expect(e.field).toBe(field);
  else expect(e.field).toMatch(field);
  expect(e.message).toContain(file);
  return e;
}

describe('GGUF round trip', () => {
  it('writes v3 and reads back every metadata type and the exact tensor bytes', () => {
    const file = path.join(dir, 'roundtrip.gguf');
    const metadata: Array<[string, GgufValue]> = [
      ['general.architecture', gv.str('llama')],
      ['t.u8', { type: 'u8', value: 250 }],
      ['t.i8', { type: 'i8', value: -100 }],
      ['t.u16', { type: 'u16', value: 65000 }],
      ['t.i16', { type: 'i16', value: -30000 }],
      ['t.u32', gv.u32(4_000_000_000)],
      ['t.i32', gv.i32(-2_000_000_000)],
      ['t.f32', gv.f32(0.15625)],
      ['t.f64', { type: 'f64', value: Math.PI }],
      ['t.u64', gv.u64(2n ** 63n + 5n)],
      ['t.i64', { type: 'i64', value: -(2n ** 62n) }],
      ['t.bool', gv.bool(true)],
      ['t.str', gv.str('héllo 世界 😀')],
      ['t.strs', gv.strings(['a', '', 'ĠĊ', '▁x'])],
      ['t.f32s', gv.f32s(new Float32Array([1.5, -2, 3.25]))],
      ['t.i32s', gv.i32s(new Int32Array([1, -2, 3]))],
      ['t.bools', { type: 'array', itemType: 'bool', value: [true, false, true] }],
      ['t.nested', { type: 'array', itemType: 'array', value: [{ type: 'array', itemType: 'u8', value: new Uint8Array([1, 2]) }] }],
    ];
    const f32 = new Float32Array(64 * 3).map((_, i) => Math.sin(i));
    const f16 = f32ToF16(new Float32Array(64).map((_, i) => i / 7));
    const bf16 = f32ToBf16(new Float32Array(32).map((_, i) => -i / 3));
    const q8 = quantizeQ8_0(new Float32Array(64).map((_, i) => Math.cos(i) * 3));
    writeGguf(file, metadata, [
      { name: 'a.weight', type: GgmlType.F32, dims: [64, 3], data: f32 },
      { name: 'b.weight', type: GgmlType.F16, dims: [64], data: f16 },
      { name: 'c.weight', type: GgmlType.BF16, dims: [32], data: bf16 },
      { name: 'd.weight', type: GgmlType.Q8_0, dims: [64, 1], data: q8 },
    ]);
    const g = readGguf(file);
    expect(g.version).toBe(3);
    expect(g.alignment).toBe(32);
    expect([...g.metadata.keys()]).toEqual(metadata.map(([k]) => k));
    for (const [k, v] of metadata) expect(g.metadata.get(k)).toEqual(v);
    expect(g.getU32('t.u32')).toBe(4_000_000_000);
    expect(g.getF32('t.f32')).toBe(0.15625);
    expect(g.getString('t.str')).toBe('héllo 世界 😀');
    expect(g.getStringArray('t.strs')).toEqual(['a', '', 'ĠĊ', '▁x']);
    expect(Array.from(g.getI32Array('t.i32s'))).toEqual([1, -2, 3]);
    expect(g.getBool('t.bool')).toBe(true);

    const a = g.tensor('a.weight');
    expect(a.type).toBe(GgmlType.F32);
    expect(a.dims).toEqual([64, 3]);
    expect(a.byteLength).toBe(64 * 3 * 4);
    expect(Buffer.from(a.data)).toEqual(Buffer.from(f32.buffer));
    expect(Buffer.from(g.tensor('b.weight').data)).toEqual(Buffer.from(f16.buffer));
    expect(Buffer.from(g.tensor('c.weight').data)).toEqual(Buffer.from(bf16.buffer));
    expect(Buffer.from(g.tensor('d.weight').data)).toEqual(Buffer.from(q8));
    expect(g.tensor('d.weight').byteLength).toBe(2 * 34);
    for (const t of g.tensors.values()) expect((t.fileOffset - g.dataOffset) % 32).toBe(0);
    // Views into one file buffer, not copies.
    expect(a.data.buffer).toBe(g.tensor('b.weight').data.buffer);
    const asF32 = new Float32Array(a.data.buffer, a.data.byteOffset, a.elements);
    expect(asF32[5]).toBe(f32[5]);
  });

  it('maps the file by default: same bytes as reading it, released by close()', () => {
    const file = ensureSyntheticModel('tiny', { dataDir: dir, weightType: 'f16', progress: null });
    const mapped = readGguf(file);
    const read = readGguf(file, { mmap: false });
    expect(mapped.tensors.size).toBe(read.tensors.size);
    for (const [name, t] of read.tensors) expect(Buffer.from(mapped.tensor(name).data).equals(Buffer.from(t.data))).toBe(true);
    expect(mapped.tensor('token_embd.weight').data.buffer.byteLength).toBe(fs.statSync(file).size);
    const view = mapped.tensor('output.weight').data;
    mapped.close();
    expect(view.byteLength).toBe(0); // unmapped: the view is detached, not dangling
    expect(mapped.tensors.size).toBe(0);
    read.close();
  });

  it('honours a custom general.alignment', () => {
    const file = path.join(dir, 'align64.gguf');
    writeGguf(file, [['general.architecture', gv.str('x')]], [
      { name: 'x', type: GgmlType.F32, dims: [3], data: new Float32Array([1, 2, 3]) },
      { name: 'y', type: GgmlType.F32, dims: [5], data: new Float32Array([4, 5, 6, 7, 8]) },
    ], { alignment: 64 });
    const g = readGguf(file);
    expect(g.alignment).toBe(64);
    expect(g.dataOffset % 64).toBe(0);
    expect(g.tensor('y').fileOffset - g.dataOffset).toBe(64);
    expect(Array.from(new Float32Array(g.tensor('y').data.slice().buffer))).toEqual([4, 5, 6, 7, 8]);
  });

  it('reads a v2 file written by an independent encoder', () => {
    const file = path.join(dir, 'v2.gguf');
    const data = Buffer.from(new Float32Array([1, 2, 3, 4]).buffer);
    fs.writeFileSync(file, rawGguf({ version: 2, kv: [{ key: 'general.architecture', type: 8, body: strBody('llama') }, { key: 'llama.block_count', type: 4, body: u32Body(7) }], tensors: [{ name: 't', dims: [4], type: 0, offset: 0 }], data }));
    const g = readGguf(file);
    expect(g.version).toBe(2);
    expect(g.getU32('llama.block_count')).toBe(7);
    expect(Array.from(new Float32Array(g.tensor('t').data.slice().buffer))).toEqual([1, 2, 3, 4]);
  });

  it('is loaded by llama.cpp (weights included) when written as a synthetic model', async () => {
    for (const weightType of ['f32', 'f16', 'bf16', 'q8_0'] as const) {
      const file = ensureSyntheticModel('tiny', { dataDir: dir, weightType, progress: null });
      const res = await llamaCppTokenize(file, [{ text: 'Hello world', parseSpecial: false }], { vocabOnly: false });
      expect(res.trainContextSize).toBe(2048);
      expect(res.tokens[0].length).toBeGreaterThan(0);
    }
    const qwen = ensureSyntheticModel('tiny', { dataDir: dir, weightType: 'q8_0', arch: 'qwen2', progress: null });
    expect((await llamaCppTokenize(qwen, [{ text: 'x', parseSpecial: false }], { vocabOnly: false })).trainContextSize).toBe(2048);
  });
});

describe('GGUF bad files give typed errors naming file and field', () => {
  const good = () => rawGguf({ kv: [{ key: 'general.architecture', type: 8, body: strBody('llama') }], tensors: [{ name: 'w', dims: [8, 2], type: 0, offset: 0 }], data: Buffer.alloc(64) });

  it('missing file', () => {
    const file = path.join(dir, 'nope.gguf');
    expectGgufError(() => readGguf(file), 'KVT_ERR_GGUF_IO', file, 'file');
  });

  it('wrong magic', () => {
    const file = path.join(dir, 'magic.gguf');
    fs.writeFileSync(file, rawGguf({ magic: 0x4c4d4747 }));
    expectGgufError(() => readGguf(file), 'KVT_ERR_GGUF_BAD_MAGIC', file, 'header.magic');
  });

  it('unsupported versions', () => {
    for (const version of [1, 4, 0x03000000]) {
      const file = path.join(dir, `v${version}.gguf`);
      fs.writeFileSync(file, rawGguf({ version }));
      expectGgufError(() => readGguf(file), 'KVT_ERR_GGUF_UNSUPPORTED_VERSION', file, 'header.version');
    }
  });

  it('truncated header names what was being read', () => {
    const file = path.join(dir, 'trunc.gguf');
    const bytes = good();
    fs.writeFileSync(file, bytes.subarray(0, 40));
    const e = expectGgufError(() => readGguf(file), 'KVT_ERR_GGUF_TRUNCATED', file, /general\.architecture|metadata/);
    expect(e.message).toMatch(/truncated/);
  });

  it('tensor data past the end of the file', () => {
    const file = path.join(dir, 'oob.gguf');
    const bytes = good();
    fs.writeFileSync(file, bytes.subarray(0, bytes.length - 8));
    expectGgufError(() => readGguf(file), 'KVT_ERR_GGUF_TENSOR_OUT_OF_BOUNDS', file, 'tensor w');
  });

  it('unknown and unsupported tensor types', () => {
    const unknown = path.join(dir, 'unknown-type.gguf');
    fs.writeFileSync(unknown, rawGguf({ tensors: [{ name: 'w', dims: [32], type: 99, offset: 0 }], data: Buffer.alloc(128) }));
    expectGgufError(() => readGguf(unknown), 'KVT_ERR_GGUF_UNKNOWN_TENSOR_TYPE', unknown, 'tensor w.type');

    const iq2 = path.join(dir, 'iq2xxs.gguf');
    fs.writeFileSync(iq2, rawGguf({ tensors: [{ name: 'blk.0.ffn_up.weight', dims: [256], type: GgmlType.IQ2_XXS, offset: 0 }], data: Buffer.alloc(66) }));
    const e = expectGgufError(() => readGguf(iq2), 'KVT_ERR_GGUF_UNSUPPORTED_TENSOR_TYPE', iq2, 'tensor blk.0.ffn_up.weight.type');
    expect(e.message).toContain('IQ2_XXS');
    expect(e.message).toContain('Q4_K'); // names what is supported
    // Inspection mode still lists it.
    expect(readGguf(iq2, { rejectUnsupportedTypes: false }).tensor('blk.0.ffn_up.weight').type).toBe(GgmlType.IQ2_XXS);
  });

  it('misaligned tensor offset and bad metadata value type', () => {
    const mis = path.join(dir, 'misaligned.gguf');
    fs.writeFileSync(mis, rawGguf({ tensors: [{ name: 'w', dims: [4], type: 0, offset: 4 }], data: Buffer.alloc(64) }));
    expectGgufError(() => readGguf(mis), 'KVT_ERR_GGUF_BAD_TENSOR', mis, 'tensor w.offset');

    const badType = path.join(dir, 'bad-value-type.gguf');
    fs.writeFileSync(badType, rawGguf({ kv: [{ key: 'general.weird', type: 42, body: Buffer.alloc(8) }] }));
    expectGgufError(() => readGguf(badType), 'KVT_ERR_GGUF_BAD_VALUE_TYPE', badType, 'general.weird');
  });

  it('missing and mistyped metadata, missing tensor', () => {
    const file = path.join(dir, 'meta.gguf');
    fs.writeFileSync(file, good());
    const g = readGguf(file);
    expectGgufError(() => g.getU32('llama.block_count'), 'KVT_ERR_GGUF_MISSING_METADATA', file, 'llama.block_count');
    expectGgufError(() => g.getU32('general.architecture'), 'KVT_ERR_GGUF_METADATA_TYPE', file, 'general.architecture');
    expectGgufError(() => g.getStringArray('general.architecture'), 'KVT_ERR_GGUF_METADATA_TYPE', file, 'general.architecture');
    expectGgufError(() => g.tensor('output.weight'), 'KVT_ERR_GGUF_MISSING_TENSOR', file, 'tensor output.weight');
    expect(g.optU32('llama.block_count')).toBeUndefined();
  });
});

describe('f16 / bf16 / Q8_0 conversion matches ggml', () => {
  it('f16 rounds to nearest even, handles overflow and subnormals', () => {
    expect(f32ToF16Bits(1)).toBe(0x3c00);
    expect(f32ToF16Bits(-2)).toBe(0xc000);
    expect(f32ToF16Bits(65504)).toBe(0x7bff);
    expect(f32ToF16Bits(65520)).toBe(0x7c00); // halfway to the next binade rounds up to inf
    expect(f32ToF16Bits(1 + 2 ** -11)).toBe(0x3c00); // tie → even
    expect(f32ToF16Bits(1 + 3 * 2 ** -11)).toBe(0x3c02); // tie → even (up)
    expect(f32ToF16Bits(2 ** -24)).toBe(0x0001);
    expect(f32ToF16Bits(2 ** -25)).toBe(0x0000); // tie → even (zero)
    expect(f32ToF16Bits(3 * 2 ** -25)).toBe(0x0002);
    expect(f32ToF16Bits(2 ** -14)).toBe(0x0400);
    expect(f32ToF16Bits(Infinity)).toBe(0x7c00);
    expect(f32ToF16Bits(NaN) & 0x7e00).toBe(0x7e00);
    for (const x of [0.1, 3.14159, -1234.5, 1e-3]) expect(Math.abs(f16BitsToF32(f32ToF16Bits(x)) - x)).toBeLessThanOrEqual(Math.abs(x) * 2 ** -11);
  });

  it('bf16 rounds to nearest even', () => {
    const out = f32ToBf16(new Float32Array([1, 1 + 2 ** -8, 1 + 3 * 2 ** -8, -0.5]));
    expect(Array.from(out)).toEqual([0x3f80, 0x3f80, 0x3f82, 0xbf00]);
  });

  it('Q8_0: scale = max|x|/127 as f16, quants rounded half away from zero', () => {
    // amax = 127 → d = 1 exactly: quants are round(x) with C roundf semantics.
    const x = new Float32Array(32);
    x[0] = 127;
    x[1] = 2.5;
    x[2] = -2.5;
    x[3] = 0.5;
    x[4] = -0.5;
    x[5] = -127;
    x[6] = 3.49;
    x[7] = -100.51;
    const q = quantizeQ8_0(x);
    expect(q.length).toBe(34);
    expect(q[0] | (q[1] << 8)).toBe(0x3c00);
    const qs = Array.from(new Int8Array(q.buffer, 2, 8));
    expect(qs).toEqual([127, 3, -3, 1, -1, -127, 3, -101]);
  });

  it('Q8_0: a block of j−16 and an all-zero block', () => {
    const x = new Float32Array(64);
    for (let j = 0; j < 32; j++) x[j] = j - 16;
    const q = quantizeQ8_0(x);
    // d = 16/127 = 0.1259842… → f16 0x3008 (0.1259766)
    expect(q[0] | (q[1] << 8)).toBe(0x3008);
    const qs = new Int8Array(q.buffer, 2, 32);
    expect(qs[0]).toBe(-127); // −16 · 127/16
    expect(qs[31]).toBe(119); // 15 · 7.9375 = 119.06
    expect(qs[16]).toBe(0);
    expect(qs[17]).toBe(8); // 7.94
    // zero block: d = 0, id = 0, all quants 0
    expect(Array.from(q.subarray(34))).toEqual(new Array(34).fill(0));
    // dequantized values are within half a step (plus the f16 scale error) of the input
    const back = dequantizeQ8_0(q, 64);
    for (let j = 0; j < 32; j++) expect(Math.abs(back[j] - x[j])).toBeLessThan(0.07);
  });
});
