/**
 * Block payload codecs: the compressed forms a block's KV can be stored in.
 * Formats (per K/V head matrix or MLA latent matrix [tokens][headDim]) are in
 * native/src/ops/kv-codec.h; encode and decode run in the native core (decode
 * vectorised, with a plain reference twin).
 *
 * | codec | values                                   | scales (f16)                          | stored / raw f16 (64 tokens) |
 * | ----- | ---------------------------------------- | ------------------------------------- | ---------------------------- |
 * | none  | as exported                              | —                                     | 1                            |
 * | int8  | symmetric int8                           | per channel (over the block's tokens) | 0.516                        |
 * | fp8   | e4m3                                     | per channel                           | 0.516                        |
 * | int4  | symmetric int4 (q+8 nibbles)             | K, MLA: per channel; V: per 32 of a row | 0.266 (K) … 0.281 (V)      |
 *
 * Only f32 and f16 pages are compressed; a bf16/q8_0 payload, or one with a
 * non-finite value, is stored as `none` (the header says which).
 */
import { loadAddon, type NativeAddon } from '../../../native/index.ts';

import type { KvLayout } from '../kv-layout.ts';
import { CodecError } from './codec-errors.ts';

export const BLOCK_CODECS = ['none', 'int8', 'fp8', 'int4'] as const;
export type BlockCodecName = (typeof BLOCK_CODECS)[number];

/** Header byte 74 of a block file: the index in BLOCK_CODECS (0 = none, which every older file has). */
export function codecId(name: BlockCodecName): number {
  return BLOCK_CODECS.indexOf(name);
}

export function codecName(id: number): BlockCodecName | undefined {
  return BLOCK_CODECS[id];
}

export function isBlockCodecName(value: unknown): value is BlockCodecName {
  return typeof value === 'string' && (BLOCK_CODECS as readonly string[]).includes(value);
}

export function assertBlockCodecName(value: unknown): asserts value is BlockCodecName {
  if (!isBlockCodecName(value)) throw new CodecError('KVT_ERR_CODEC_UNKNOWN', `unknown block codec ${JSON.stringify(value)}; use one of ${BLOCK_CODECS.join(', ')}`);
}

/** Whether a payload of this layout can be stored under `codec` (f32/f16 pages only). */
export function codecApplies(codec: BlockCodecName, layout: KvLayout): boolean {
  return codec !== 'none' && (layout.dtype === 'f16' || layout.dtype === 'f32');
}

let addon: NativeAddon | null = null;
function native(): NativeAddon {
  addon ??= loadAddon();
  return addon;
}

type Shape = [codec: number, dtype: number, mla: number, layers: number, kvHeads: number, headDim: number, tokens: number];

function shapeOf(codec: BlockCodecName, layout: KvLayout, tokens: number): Shape {
  return [codecId(codec), layout.dtype === 'f32' ? 0 : 1, layout.kind === 'mla' ? 1 : 0, layout.layers, layout.kvHeads, layout.headDim, tokens];
}

/** Stored payload bytes of `tokens` tokens of `layout` under `codec` (raw bytes for none). */
export function storedPayloadBytes(codec: BlockCodecName, layout: KvLayout, tokens: number, rawBytes: number): number {
  return codecApplies(codec, layout) ? native().kvCodecBytes(...shapeOf(codec, layout, tokens)) : rawBytes;
}

/**
 * The compressed payload, or null when this payload is stored as `none`
 * (codec none, a dtype the codecs do not take, a value that is not finite).
 */
export function compressPayload(codec: BlockCodecName, layout: KvLayout, tokens: number, payload: Uint8Array): Uint8Array | null {
  if (!codecApplies(codec, layout)) return null;
  const shape = shapeOf(codec, layout, tokens);
  const out = new Uint8Array(native().kvCodecBytes(...shape));
  return native().kvEncode(out, payload, ...shape) ? out : null;
}

/** Decompresses into `out` (raw payload bytes, page layout); the native kernel checks both lengths. */
export function decompressPayloadInto(out: Uint8Array, codec: BlockCodecName, layout: KvLayout, tokens: number, stored: Uint8Array, reference = false): void {
  const shape = shapeOf(codec, layout, tokens);
  if (reference) native().kvDecodeRef(out, stored, ...shape);
  else native().kvDecode(out, stored, ...shape);
}
