/**
 * GGUF v3 writer. Metadata and tensor infos are declared first; tensor data
 * is then streamed to disk one tensor at a time (in declaration order), each
 * padded to the alignment, so a model larger than memory can be written while
 * it is generated. The file is written under a temp name and renamed into
 * place by `finish()`, so a reader never sees a partial model.
 */
import * as fs from 'node:fs';
import * as nodePath from 'node:path';
import { GgufError } from './gguf-errors.ts';
import { GgmlType, ggmlStorageInfo, ggmlTypeName } from './ggml-type.ts';
import { GGUF_DEFAULT_ALIGNMENT, GGUF_MAGIC } from './gguf-reader.ts';
import { VALUE_TYPE_BY_NAME, type GgufArrayValue, type GgufValue } from './gguf-value.ts';

export interface GgufTensorSpec {
  name: string;
  type: GgmlType;
  /** ne0 first. */
  dims: number[];
}

interface PlannedTensor extends GgufTensorSpec {
  byteLength: number;
  offset: number;
}

const enc = new TextEncoder();

/** Growable little-endian byte sink for the header. */
class ByteSink {
  private buf = new Uint8Array(1 << 16);
  private view = new DataView(this.buf.buffer);
  length = 0;
  private reserve(n: number): void {
    if (this.length + n <= this.buf.length) return;
    let cap = this.buf.length * 2;
    while (cap < this.length + n) cap *= 2;
    const next = new Uint8Array(cap);
    next.set(this.buf.subarray(0, this.length));
    this.buf = next;
    this.view = new DataView(next.buffer);
  }
  u8(v: number): void { this.reserve(1); this.view.setUint8(this.length, v); this.length += 1; }
  i8(v: number): void { this.reserve(1); this.view.setInt8(this.length, v); this.length += 1; }
  u16(v: number): void { this.reserve(2); this.view.setUint16(this.length, v, true); this.length += 2; }
  i16(v: number): void { this.reserve(2); this.view.setInt16(this.length, v, true); this.length += 2; }
  u32(v: number): void { this.reserve(4); this.view.setUint32(this.length, v, true); this.length += 4; }
  i32(v: number): void { this.reserve(4); this.view.setInt32(this.length, v, true); this.length += 4; }
  f32(v: number): void { this.reserve(4); this.view.setFloat32(this.length, v, true); this.length += 4; }
  f64(v: number): void { this.reserve(8); this.view.setFloat64(this.length, v, true); this.length += 8; }
  u64(v: bigint | number): void { this.reserve(8); this.view.setBigUint64(this.length, BigInt(v), true); this.length += 8; }
  i64(v: bigint): void { this.reserve(8); this.view.setBigInt64(this.length, v, true); this.length += 8; }
  bytes(b: Uint8Array): void { this.reserve(b.length); this.buf.set(b, this.length); this.length += b.length; }
  str(s: string): void { const b = enc.encode(s); this.u64(b.length); this.bytes(b); }
  pad(alignment: number): void { const n = (alignment - (this.length % alignment)) % alignment; this.reserve(n); this.buf.fill(0, this.length, this.length + n); this.length += n; }
  result(): Uint8Array { return this.buf.subarray(0, this.length); }
}

function typedBytes(a: ArrayBufferView): Uint8Array {
  return new Uint8Array(a.buffer, a.byteOffset, a.byteLength);
}

function writeValue(s: ByteSink, v: GgufValue): void {
  switch (v.type) {
    case 'u8': return s.u8(v.value);
    case 'i8': return s.i8(v.value);
    case 'u16': return s.u16(v.value);
    case 'i16': return s.i16(v.value);
    case 'u32': return s.u32(v.value);
    case 'i32': return s.i32(v.value);
    case 'f32': return s.f32(v.value);
    case 'f64': return s.f64(v.value);
    case 'u64': return s.u64(v.value);
    case 'i64': return s.i64(v.value);
    case 'bool': return s.u8(v.value ? 1 : 0);
    case 'string': return s.str(v.value);
    case 'array': return writeArray(s, v);
  }
}

function writeArray(s: ByteSink, v: GgufArrayValue): void {
  s.u32(VALUE_TYPE_BY_NAME[v.itemType]);
  s.u64(v.value.length);
  switch (v.itemType) {
    case 'string': for (const x of v.value) s.str(x); return;
    case 'bool': for (const x of v.value) s.u8(x ? 1 : 0); return;
    case 'array': for (const x of v.value) writeArray(s, x); return;
    default: s.bytes(typedBytes(v.value)); return;
  }
}

export class GgufWriter {
  private readonly metadata = new Map<string, GgufValue>();
  private readonly planned: PlannedTensor[] = [];
  private fd: number | null = null;
  private readonly tempPath: string;
  private nextTensor = 0;
  private filePos = 0;
  private dataStart = 0;
  readonly alignment: number;

  constructor(
    readonly path: string,
    options: { alignment?: number } = {},
  ) {
    this.alignment = options.alignment ?? GGUF_DEFAULT_ALIGNMENT;
    this.tempPath = nodePath.join(nodePath.dirname(path), `.${nodePath.basename(path)}.tmp-${process.pid}-${Math.random().toString(36).slice(2)}`);
    if (this.alignment !== GGUF_DEFAULT_ALIGNMENT) this.metadata.set('general.alignment', { type: 'u32', value: this.alignment });
  }

  setMetadata(key: string, value: GgufValue): this {
    if (this.fd !== null) throw this.err('metadata ' + key, 'metadata must be set before the first tensor data is written');
    this.metadata.set(key, value);
    return this;
  }

  addTensor(spec: GgufTensorSpec): this {
    if (this.fd !== null) throw this.err('tensor ' + spec.name, 'tensors must be declared before the first tensor data is written');
    const info = ggmlStorageInfo(spec.type);
    if (!info) throw this.err('tensor ' + spec.name, `type ${ggmlTypeName(spec.type)} cannot be written`);
    const elements = spec.dims.reduce((a, b) => a * b, 1);
    if ((spec.dims[0] ?? 1) % info.blockElems !== 0) throw this.err('tensor ' + spec.name, `ne0 ${spec.dims[0]} is not a multiple of ${info.blockElems}`);
    const byteLength = (elements / info.blockElems) * info.blockBytes;
    const last = this.planned[this.planned.length - 1];
    const offset = last ? alignUp(last.offset + last.byteLength, this.alignment) : 0;
    this.planned.push({ ...spec, dims: [...spec.dims], byteLength, offset });
    return this;
  }

  private err(field: string, message: string): GgufError {
    return new GgufError('KVT_ERR_GGUF_WRITE', this.path, field, message);
  }

  private begin(): void {
    fs.mkdirSync(nodePath.dirname(this.path), { recursive: true });
    const s = new ByteSink();
    s.u32(GGUF_MAGIC);
    s.u32(3);
    s.u64(this.planned.length);
    s.u64(this.metadata.size);
    for (const [key, value] of this.metadata) {
      s.str(key);
      s.u32(VALUE_TYPE_BY_NAME[value.type]);
      writeValue(s, value);
    }
    for (const t of this.planned) {
      s.str(t.name);
      s.u32(t.dims.length);
      for (const d of t.dims) s.u64(d);
      s.u32(t.type);
      s.u64(t.offset);
    }
    s.pad(this.alignment);
    this.fd = fs.openSync(this.tempPath, 'w');
    this.writeAll(s.result());
    this.dataStart = this.filePos;
  }

  private writeAll(bytes: Uint8Array): void {
    let done = 0;
    while (done < bytes.length) {
      done += fs.writeSync(this.fd!, bytes, done, bytes.length - done, this.filePos + done);
    }
    this.filePos += bytes.length;
  }

  /** Writes the next declared tensor's bytes (f32 → pass a Float32Array; f16/bf16 → Uint16Array; block types → their GGUF bytes, e.g. from quantize()). */
  writeTensorData(name: string, data: ArrayBufferView): void {
    if (this.fd === null) this.begin();
    const t = this.planned[this.nextTensor];
    if (!t || t.name !== name) throw this.err('tensor ' + name, `tensor data must be written in declaration order; expected ${t ? t.name : 'no more tensors'}`);
    if (data.byteLength !== t.byteLength) throw this.err('tensor ' + name, `has ${data.byteLength} bytes, its ${ggmlTypeName(t.type)} shape [${t.dims.join(', ')}] needs ${t.byteLength}`);
    const padTo = this.dataStart + t.offset;
    if (padTo > this.filePos) this.writeAll(new Uint8Array(padTo - this.filePos));
    this.writeAll(typedBytes(data));
    this.nextTensor++;
  }

  /** Pads the file, fsyncs and renames it into place. Returns the final path. */
  finish(): string {
    if (this.fd === null) this.begin();
    if (this.nextTensor !== this.planned.length) {
      const missing = this.planned[this.nextTensor]!;
      this.abort();
      throw this.err('tensor ' + missing.name, 'finish() called before all tensor data was written');
    }
    const pad = (this.alignment - (this.filePos % this.alignment)) % this.alignment;
    if (pad && this.planned.length) this.writeAll(new Uint8Array(pad));
    fs.fsyncSync(this.fd!);
    fs.closeSync(this.fd!);
    this.fd = null;
    fs.renameSync(this.tempPath, this.path);
    return this.path;
  }

  /** Drops the partial temp file. */
  abort(): void {
    if (this.fd !== null) {
      fs.closeSync(this.fd);
      this.fd = null;
    }
    fs.rmSync(this.tempPath, { force: true });
  }
}

function alignUp(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

/** One-shot convenience: write metadata and in-memory tensors to `path`. */
export function writeGguf(
  path: string,
  metadata: Iterable<[string, GgufValue]>,
  tensors: Array<GgufTensorSpec & { data: ArrayBufferView }>,
  options: { alignment?: number } = {},
): string {
  const w = new GgufWriter(path, options);
  try {
    for (const [k, v] of metadata) w.setMetadata(k, v);
    for (const t of tensors) w.addTensor(t);
    for (const t of tensors) w.writeTensorData(t.name, t.data);
    return w.finish();
  } catch (err) {
    w.abort();
    throw err;
  }
}
