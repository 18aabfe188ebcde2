/**
 * GGUF reader (versions 2 and 3, little-endian).
 *
 * File layout:
 *
 *   magic "GGUF" | u32 version | u64 n_tensors | u64 n_kv
 *   n_kv × { string key, u32 value_type, value }
 *   n_tensors × { string name, u32 n_dims, n_dims × u64 ne (ne0 first), u32 ggml_type, u64 offset }
 *   padding to general.alignment (default 32)
 *   tensor data: each tensor at data_start + offset, offsets aligned
 *
 * The whole file is one ArrayBuffer: a read-only mmap of the file (native
 * mmapFile: no copy, pages load on first touch and are shared with the page
 * cache), or, where the native addon is not built, one buffer filled with
 * positioned reads. Tensor `data` are views into it, never copies, so
 * consumers may wrap them as Float32Array/Uint16Array without paying again.
 * Mapped views are read-only memory: never write into them.
 */
import { unmapFile } from '../../native/index.ts';
import { GgufError } from './gguf-errors.ts';
import { Cursor, readValue } from './gguf-cursor.ts';
import { openFile } from './gguf-file-bytes.ts';
import { GgmlType, ggmlStorageInfo, ggmlTypeName, isKnownGgmlType, supportedGgmlTypeNames } from './ggml-type.ts';
import { type GgufArrayValue, type GgufValue } from './gguf-value.ts';

export const GGUF_MAGIC = 0x46554747; // "GGUF" read as u32 LE
export const GGUF_DEFAULT_ALIGNMENT = 32;

export interface GgufTensor {
  readonly name: string;
  readonly type: GgmlType;
  /** ne0 first, as GGUF stores it: dims[0] is the contiguous (row) length. */
  readonly dims: number[];
  readonly elements: number;
  readonly byteLength: number;
  /** Offset of the tensor's bytes from the start of the file. */
  readonly fileOffset: number;
  /** View into the loaded file; no copy. */
  readonly data: Uint8Array;
}

export interface GgufFile {
  readonly path: string;
  readonly version: number;
  readonly alignment: number;
  /** Offset of the first tensor byte in the file. */
  readonly dataOffset: number;
  readonly fileSize: number;
  readonly metadata: Map<string, GgufValue>;
  readonly tensors: Map<string, GgufTensor>;

  has(key: string): boolean;
  getU32(key: string): number;
  getI32(key: string): number;
  getF32(key: string): number;
  getBool(key: string): boolean;
  getString(key: string): string;
  getStringArray(key: string): string[];
  getF32Array(key: string): Float32Array;
  getI32Array(key: string): Int32Array;
  /** Same as the getters above but `undefined` when the key is absent (a present key of the wrong type still throws). */
  optU32(key: string): number | undefined;
  optF32(key: string): number | undefined;
  optBool(key: string): boolean | undefined;
  optString(key: string): string | undefined;
  optStringArray(key: string): string[] | undefined;
  optF32Array(key: string): Float32Array | undefined;
  optI32Array(key: string): Int32Array | undefined;
  /** The tensor or a typed KVT_ERR_GGUF_MISSING_TENSOR error. */
  tensor(name: string): GgufTensor;
  /** Releases the file buffer; tensor views must not be used afterwards. */
  close(): void;
}

export interface ReadGgufOptions {
  /** Map the file instead of reading it (default true; falls back to reading when the native addon is not built). */
  mmap?: boolean;
  /**
   * Reject tensors of types the engine cannot compute (default true). Set
   * false to inspect any GGUF (the tensors of unsupported types then have an
   * empty `data`).
   */
  rejectUnsupportedTypes?: boolean;
}

export function readGguf(path: string, options: ReadGgufOptions = {}): GgufFile {
  const { bytes, mapped } = openFile(path, options.mmap ?? true);
  try {
    const file = parseGguf(bytes, path, options) as LoadedGguf;
    if (mapped) file.onClose = () => unmapFile(bytes.buffer as ArrayBuffer);
    return file;
  } catch (err) {
    if (mapped) unmapFile(bytes.buffer as ArrayBuffer);
    throw err;
  }
}

/** Parses a GGUF image already in memory (`bytes` must start at the file's first byte). */
export function parseGguf(bytes: Uint8Array, path: string, options: ReadGgufOptions = {}): GgufFile {
  const rejectUnsupported = options.rejectUnsupportedTypes ?? true;
  const c = new Cursor(bytes, path);
  const magic = c.u32('header.magic');
  if (magic !== GGUF_MAGIC) {
    throw new GgufError('KVT_ERR_GGUF_BAD_MAGIC', path, 'header.magic', `expected "GGUF", found 0x${magic.toString(16).padStart(8, '0')}; this is not a GGUF file`);
  }
  const version = c.u32('header.version');
  if (version !== 2 && version !== 3) {
    const hint = version === 1 ? 'GGUF v1 is obsolete; reconvert with a current llama.cpp' : version > 0xffff ? 'this looks like a big-endian file; only little-endian GGUF is supported' : 'only versions 2 and 3 are supported';
    throw new GgufError('KVT_ERR_GGUF_UNSUPPORTED_VERSION', path, 'header.version', `version ${version}: ${hint}`);
  }
  const nTensors = c.size('header.n_tensors');
  const nKv = c.size('header.n_kv');

  const metadata = new Map<string, GgufValue>();
  for (let i = 0; i < nKv; i++) {
    const key = c.str(`metadata[${i}].key`);
    const type = c.u32(key);
    metadata.set(key, readValue(c, type, key));
  }

  let alignment = GGUF_DEFAULT_ALIGNMENT;
  const alignValue = metadata.get('general.alignment');
  if (alignValue !== undefined) {
    if (alignValue.type !== 'u32' || alignValue.value === 0 || (alignValue.value & (alignValue.value - 1)) !== 0) {
      throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', path, 'general.alignment', `must be a u32 power of two, found ${describe(alignValue)}`);
    }
    alignment = alignValue.value;
  }

  interface RawInfo { name: string; dims: number[]; type: number; offset: number }
  const infos: RawInfo[] = [];
  for (let i = 0; i < nTensors; i++) {
    const name = c.str(`tensor[${i}].name`);
    const nDims = c.u32(`tensor ${name}.n_dims`);
    if (nDims > 8) throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', path, `tensor ${name}.n_dims`, `${nDims} dims (at most 8); the file is corrupt`);
    const dims: number[] = [];
    for (let d = 0; d < nDims; d++) dims.push(c.size(`tensor ${name}.ne[${d}]`));
    const type = c.u32(`tensor ${name}.type`);
    const offset = c.size(`tensor ${name}.offset`);
    infos.push({ name, dims, type, offset });
  }
  const dataOffset = alignUp(c.pos, alignment);

  const tensors = new Map<string, GgufTensor>();
  for (const info of infos) {
    const field = `tensor ${info.name}`;
    if (!isKnownGgmlType(info.type)) {
      throw new GgufError('KVT_ERR_GGUF_UNKNOWN_TENSOR_TYPE', path, `${field}.type`, `ggml type id ${info.type} is unknown; the file is corrupt or needs a newer reader`);
    }
    if (tensors.has(info.name)) throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', path, field, 'duplicate tensor name; the file is corrupt');
    if (info.offset % alignment !== 0) {
      throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', path, `${field}.offset`, `offset ${info.offset} is not aligned to ${alignment}; the file is corrupt`);
    }
    const elements = info.dims.reduce((a, b) => a * b, 1);
    const sizeInfo = ggmlStorageInfo(info.type as GgmlType);
    if (!sizeInfo) {
      if (rejectUnsupported) {
        throw new GgufError(
          'KVT_ERR_GGUF_UNSUPPORTED_TENSOR_TYPE',
          path,
          `${field}.type`,
          `type ${ggmlTypeName(info.type)} is not supported (${supportedGgmlTypeNames()} are); requantize the model, e.g. llama-quantize --allow-requantize in.gguf out.gguf Q4_K_M`,
        );
      }
      tensors.set(info.name, { name: info.name, type: info.type as GgmlType, dims: info.dims, elements, byteLength: 0, fileOffset: dataOffset + info.offset, data: new Uint8Array(0) });
      continue;
    }
    if ((info.dims[0] ?? 1) % sizeInfo.blockElems !== 0) {
      throw new GgufError('KVT_ERR_GGUF_BAD_TENSOR', path, `${field}.ne[0]`, `row length ${info.dims[0]} is not a multiple of the ${ggmlTypeName(info.type)} block (${sizeInfo.blockElems})`);
    }
    const byteLength = (elements / sizeInfo.blockElems) * sizeInfo.blockBytes;
    const start = dataOffset + info.offset;
    if (start + byteLength > bytes.byteLength) {
      throw new GgufError(
        'KVT_ERR_GGUF_TENSOR_OUT_OF_BOUNDS',
        path,
        field,
        `data [${start}, ${start + byteLength}) runs past the end of the file (${bytes.byteLength} bytes); the file is truncated — re-download or regenerate it`,
      );
    }
    tensors.set(info.name, {
      name: info.name,
      type: info.type as GgmlType,
      dims: info.dims,
      elements,
      byteLength,
      fileOffset: start,
      data: bytes.subarray(start, start + byteLength),
    });
  }

  return new LoadedGguf(path, version, alignment, dataOffset, bytes.byteLength, metadata, tensors);
}

function alignUp(n: number, a: number): number {
  return Math.ceil(n / a) * a;
}

function describe(v: GgufValue): string {
  return v.type === 'array' ? `array of ${v.itemType}` : v.type;
}

const INTEGER_TYPES = new Set(['u8', 'i8', 'u16', 'i16', 'u32', 'i32', 'u64', 'i64']);

class LoadedGguf implements GgufFile {
  constructor(
    readonly path: string,
    readonly version: number,
    readonly alignment: number,
    readonly dataOffset: number,
    readonly fileSize: number,
    readonly metadata: Map<string, GgufValue>,
    readonly tensors: Map<string, GgufTensor>,
  ) {}

  has(key: string): boolean {
    return this.metadata.has(key);
  }

  private missing(key: string, want: string): never {
    throw new GgufError('KVT_ERR_GGUF_MISSING_METADATA', this.path, key, `required ${want} metadata key is missing; the file was not converted for this architecture or is incomplete`);
  }
  private mistyped(key: string, want: string, v: GgufValue): never {
    throw new GgufError('KVT_ERR_GGUF_METADATA_TYPE', this.path, key, `expected ${want}, found ${describe(v)}`);
  }

  private uint(key: string, required: boolean, max: number, want: string): number | undefined {
    const v = this.metadata.get(key);
    if (v === undefined) return required ? this.missing(key, want) : undefined;
    // Converters disagree on integer widths (u32 vs u64 vs i32); accept any integer that fits.
    if (!INTEGER_TYPES.has(v.type)) this.mistyped(key, want, v);
    const n = typeof v.value === 'bigint' ? Number(v.value) : (v.value as number);
    if (!Number.isInteger(n) || n < (want === 'i32' ? -0x80000000 : 0) || n > max) this.mistyped(key, want, v);
    return n;
  }

  getU32(key: string): number { return this.uint(key, true, 0xffffffff, 'u32')!; }
  optU32(key: string): number | undefined { return this.uint(key, false, 0xffffffff, 'u32'); }
  getI32(key: string): number { return this.uint(key, true, 0x7fffffff, 'i32')!; }

  private float(key: string, required: boolean): number | undefined {
    const v = this.metadata.get(key);
    if (v === undefined) return required ? this.missing(key, 'f32') : undefined;
    if (v.type !== 'f32' && v.type !== 'f64') this.mistyped(key, 'f32', v);
    return v.value as number;
  }
  getF32(key: string): number { return this.float(key, true)!; }
  optF32(key: string): number | undefined { return this.float(key, false); }

  private typed<T>(key: string, required: boolean, type: GgufValue['type'], itemType?: string): T | undefined {
    const v = this.metadata.get(key);
    const want = itemType ? `array of ${itemType}` : type;
    if (v === undefined) return required ? this.missing(key, want) : undefined;
    if (v.type !== type || (itemType !== undefined && (v as GgufArrayValue).itemType !== itemType)) this.mistyped(key, want, v);
    return v.value as T;
  }
  getBool(key: string): boolean { return this.typed<boolean>(key, true, 'bool')!; }
  optBool(key: string): boolean | undefined { return this.typed<boolean>(key, false, 'bool'); }
  getString(key: string): string { return this.typed<string>(key, true, 'string')!; }
  optString(key: string): string | undefined { return this.typed<string>(key, false, 'string'); }
  getStringArray(key: string): string[] { return this.typed<string[]>(key, true, 'array', 'string')!; }
  optStringArray(key: string): string[] | undefined { return this.typed<string[]>(key, false, 'array', 'string'); }
  getF32Array(key: string): Float32Array { return this.typed<Float32Array>(key, true, 'array', 'f32')!; }
  optF32Array(key: string): Float32Array | undefined { return this.typed<Float32Array>(key, false, 'array', 'f32'); }
  getI32Array(key: string): Int32Array { return this.typed<Int32Array>(key, true, 'array', 'i32')!; }
  optI32Array(key: string): Int32Array | undefined { return this.typed<Int32Array>(key, false, 'array', 'i32'); }

  tensor(name: string): GgufTensor {
    const t = this.tensors.get(name);
    if (!t) throw new GgufError('KVT_ERR_GGUF_MISSING_TENSOR', this.path, `tensor ${name}`, 'required tensor is missing; the file is incomplete or for another architecture');
    return t;
  }

  /** Set by readGguf for a mapped file. */
  onClose: (() => void) | undefined;

  close(): void {
    // A read buffer is garbage collected once the tensor views are dropped; a mapping is released now.
    this.tensors.clear();
    const release = this.onClose;
    this.onClose = undefined;
    release?.();
  }
}
