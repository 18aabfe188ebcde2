/**
 * GGUF metadata values, tagged with their on-disk type so typed getters can
 * tell "missing" from "present but the wrong type" and the writer can round
 * trip a file exactly.
 */
export enum GgufValueType {
  UINT8 = 0,
  INT8 = 1,
  UINT16 = 2,
  INT16 = 3,
  UINT32 = 4,
  INT32 = 5,
  FLOAT32 = 6,
  BOOL = 7,
  STRING = 8,
  ARRAY = 9,
  UINT64 = 10,
  INT64 = 11,
  FLOAT64 = 12,
}

export type GgufScalarType = 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'bool' | 'string' | 'u64' | 'i64' | 'f64';

/** Numeric arrays are typed arrays (token scores/types are large); strings stay string[]. */
export type GgufArrayValue =
  | { type: 'array'; itemType: 'u8'; value: Uint8Array }
  | { type: 'array'; itemType: 'i8'; value: Int8Array }
  | { type: 'array'; itemType: 'u16'; value: Uint16Array }
  | { type: 'array'; itemType: 'i16'; value: Int16Array }
  | { type: 'array'; itemType: 'u32'; value: Uint32Array }
  | { type: 'array'; itemType: 'i32'; value: Int32Array }
  | { type: 'array'; itemType: 'f32'; value: Float32Array }
  | { type: 'array'; itemType: 'f64'; value: Float64Array }
  | { type: 'array'; itemType: 'u64'; value: BigUint64Array }
  | { type: 'array'; itemType: 'i64'; value: BigInt64Array }
  | { type: 'array'; itemType: 'bool'; value: boolean[] }
  | { type: 'array'; itemType: 'string'; value: string[] }
  | { type: 'array'; itemType: 'array'; value: GgufArrayValue[] };

export type GgufValue =
  | { type: 'u8' | 'i8' | 'u16' | 'i16' | 'u32' | 'i32' | 'f32' | 'f64'; value: number }
  | { type: 'u64' | 'i64'; value: bigint }
  | { type: 'bool'; value: boolean }
  | { type: 'string'; value: string }
  | GgufArrayValue;

export type GgufItemType = GgufArrayValue['itemType'];

export const VALUE_TYPE_BY_NAME: Record<GgufValue['type'], GgufValueType> = {
  u8: GgufValueType.UINT8,
  i8: GgufValueType.INT8,
  u16: GgufValueType.UINT16,
  i16: GgufValueType.INT16,
  u32: GgufValueType.UINT32,
  i32: GgufValueType.INT32,
  f32: GgufValueType.FLOAT32,
  bool: GgufValueType.BOOL,
  string: GgufValueType.STRING,
  array: GgufValueType.ARRAY,
  u64: GgufValueType.UINT64,
  i64: GgufValueType.INT64,
  f64: GgufValueType.FLOAT64,
};

export const VALUE_NAME_BY_TYPE: Record<number, GgufValue['type']> = Object.fromEntries(
  Object.entries(VALUE_TYPE_BY_NAME).map(([k, v]) => [v, k]),
) as Record<number, GgufValue['type']>;

/** Shorthand constructors for writing metadata. */
export const gv = {
  u32: (value: number): GgufValue => ({ type: 'u32', value }),
  i32: (value: number): GgufValue => ({ type: 'i32', value }),
  f32: (value: number): GgufValue => ({ type: 'f32', value }),
  bool: (value: boolean): GgufValue => ({ type: 'bool', value }),
  str: (value: string): GgufValue => ({ type: 'string', value }),
  u64: (value: bigint): GgufValue => ({ type: 'u64', value }),
  strings: (value: string[]): GgufValue => ({ type: 'array', itemType: 'string', value }),
  f32s: (value: Float32Array): GgufValue => ({ type: 'array', itemType: 'f32', value }),
  i32s: (value: Int32Array): GgufValue => ({ type: 'array', itemType: 'i32', value }),
};
