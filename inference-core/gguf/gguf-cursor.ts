/**
 * The GGUF header's little-endian reader: a cursor over the file's bytes that
 * names the field being read in every error, and the typed values and arrays
 * of the key/value section (layout drawn in gguf-reader.ts).
 */
import { GgufError } from './gguf-errors.ts';
import { GgufValueType, type GgufArrayValue, type GgufValue } from './gguf-value.ts';

// ignoreBOM: a token may be U+FEFF itself (Llama 2 / Mistral vocabularies); the default would strip it.
const utf8 = new TextDecoder('utf-8', { fatal: false, ignoreBOM: true });

export class Cursor {
  pos = 0;
  readonly view: DataView;
  constructor(
    readonly bytes: Uint8Array,
    readonly file: string,
  ) {
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  need(n: number, field: string): void {
    if (this.pos + n > this.bytes.byteLength) {
      throw new GgufError(
        'KVT_ERR_GGUF_TRUNCATED',
        this.file,
        field,
        `file ends at byte ${this.bytes.byteLength} while reading ${n} bytes at ${this.pos}; the file is truncated — re-download or regenerate it`,
      );
    }
  }
  u8(f: string): number { this.need(1, f); return this.view.getUint8(this.pos++); }
  i8(f: string): number { this.need(1, f); return this.view.getInt8(this.pos++); }
  u16(f: string): number { this.need(2, f); const v = this.view.getUint16(this.pos, true); this.pos += 2; return v; }
  i16(f: string): number { this.need(2, f); const v = this.view.getInt16(this.pos, true); this.pos += 2; return v; }
  u32(f: string): number { this.need(4, f); const v = this.view.getUint32(this.pos, true); this.pos += 4; return v; }
  i32(f: string): number { this.need(4, f); const v = this.view.getInt32(this.pos, true); this.pos += 4; return v; }
  f32(f: string): number { this.need(4, f); const v = this.view.getFloat32(this.pos, true); this.pos += 4; return v; }
  f64(f: string): number { this.need(8, f); const v = this.view.getFloat64(this.pos, true); this.pos += 8; return v; }
  u64(f: string): bigint { this.need(8, f); const v = this.view.getBigUint64(this.pos, true); this.pos += 8; return v; }
  i64(f: string): bigint { this.need(8, f); const v = this.view.getBigInt64(this.pos, true); this.pos += 8; return v; }
  /** A u64 that must fit a JS number (counts, lengths, offsets). */
  size(f: string): number {
    const v = this.u64(f);
    if (v > BigInt(Number.MAX_SAFE_INTEGER)) {
      throw new GgufError('KVT_ERR_GGUF_TRUNCATED', this.file, f, `size ${v} is beyond any real file; the file is corrupt`);
    }
    return Number(v);
  }
  str(f: string): string {
    const len = this.size(f);
    this.need(len, f);
    const s = utf8.decode(this.bytes.subarray(this.pos, this.pos + len));
    this.pos += len;
    return s;
  }
  /** Copies `count` little-endian elements into a fresh typed array (metadata arrays are small next to weights). */
  typed<T>(ctor: { new (buf: ArrayBuffer): T; BYTES_PER_ELEMENT: number }, count: number, f: string): T {
    const n = count * ctor.BYTES_PER_ELEMENT;
    this.need(n, f);
    const copy = this.bytes.slice(this.pos, this.pos + n);
    this.pos += n;
    return new ctor(copy.buffer);
  }
}

export function readValue(c: Cursor, type: number, field: string): GgufValue {
  switch (type) {
    case GgufValueType.UINT8: return { type: 'u8', value: c.u8(field) };
    case GgufValueType.INT8: return { type: 'i8', value: c.i8(field) };
    case GgufValueType.UINT16: return { type: 'u16', value: c.u16(field) };
    case GgufValueType.INT16: return { type: 'i16', value: c.i16(field) };
    case GgufValueType.UINT32: return { type: 'u32', value: c.u32(field) };
    case GgufValueType.INT32: return { type: 'i32', value: c.i32(field) };
    case GgufValueType.FLOAT32: return { type: 'f32', value: c.f32(field) };
    case GgufValueType.BOOL: {
      const b = c.u8(field);
      if (b > 1) throw new GgufError('KVT_ERR_GGUF_BAD_VALUE_TYPE', c.file, field, `bool byte is ${b}, expected 0 or 1; the file is corrupt`);
      return { type: 'bool', value: b === 1 };
    }
    case GgufValueType.STRING: return { type: 'string', value: c.str(field) };
    case GgufValueType.UINT64: return { type: 'u64', value: c.u64(field) };
    case GgufValueType.INT64: return { type: 'i64', value: c.i64(field) };
    case GgufValueType.FLOAT64: return { type: 'f64', value: c.f64(field) };
    case GgufValueType.ARRAY: return readArray(c, field);
    default:
      throw new GgufError('KVT_ERR_GGUF_BAD_VALUE_TYPE', c.file, field, `unknown metadata value type ${type}; the file is corrupt or from a newer GGUF version`);
  }
}

/** Nesting the reader follows: real files nest arrays once at most; a file controls the depth, so it is bounded (no stack overflow). */
const MAX_ARRAY_DEPTH = 16;

function readArray(c: Cursor, field: string, depth = 0): GgufArrayValue {
  if (depth > MAX_ARRAY_DEPTH) {
    throw new GgufError('KVT_ERR_GGUF_BAD_VALUE_TYPE', c.file, field, `arrays nested more than ${MAX_ARRAY_DEPTH} deep; the file is corrupt`);
  }
  const itemType = c.u32(field);
  const count = c.size(field);
  switch (itemType) {
    case GgufValueType.UINT8: return { type: 'array', itemType: 'u8', value: c.typed(Uint8Array, count, field) };
    case GgufValueType.INT8: return { type: 'array', itemType: 'i8', value: c.typed(Int8Array, count, field) };
    case GgufValueType.UINT16: return { type: 'array', itemType: 'u16', value: c.typed(Uint16Array, count, field) };
    case GgufValueType.INT16: return { type: 'array', itemType: 'i16', value: c.typed(Int16Array, count, field) };
    case GgufValueType.UINT32: return { type: 'array', itemType: 'u32', value: c.typed(Uint32Array, count, field) };
    case GgufValueType.INT32: return { type: 'array', itemType: 'i32', value: c.typed(Int32Array, count, field) };
    case GgufValueType.FLOAT32: return { type: 'array', itemType: 'f32', value: c.typed(Float32Array, count, field) };
    case GgufValueType.FLOAT64: return { type: 'array', itemType: 'f64', value: c.typed(Float64Array, count, field) };
    case GgufValueType.UINT64: return { type: 'array', itemType: 'u64', value: c.typed(BigUint64Array, count, field) };
    case GgufValueType.INT64: return { type: 'array', itemType: 'i64', value: c.typed(BigInt64Array, count, field) };
    case GgufValueType.BOOL: {
      c.need(count, field);
      const out: boolean[] = new Array(count);
      for (let i = 0; i < count; i++) out[i] = c.bytes[c.pos + i] !== 0;
      c.pos += count;
      return { type: 'array', itemType: 'bool', value: out };
    }
    case GgufValueType.STRING: {
      // Each string needs at least its 8-byte length: reject absurd counts before allocating.
      c.need(count * 8, field);
      const out: string[] = new Array(count);
      for (let i = 0; i < count; i++) out[i] = c.str(field);
      return { type: 'array', itemType: 'string', value: out };
    }
    case GgufValueType.ARRAY: {
      c.need(count * 12, field);
      const out: GgufArrayValue[] = new Array(count);
      for (let i = 0; i < count; i++) out[i] = readArray(c, field, depth + 1);
      return { type: 'array', itemType: 'array', value: out };
    }
    default:
      throw new GgufError('KVT_ERR_GGUF_BAD_VALUE_TYPE', c.file, field, `unknown array item type ${itemType}; the file is corrupt or from a newer GGUF version`);
  }
}
