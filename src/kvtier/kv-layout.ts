import { BlockError } from './errors.ts';

export type KvDtype = 'f32' | 'f16' | 'bf16' | 'q8_0';
export const KV_DTYPES: readonly KvDtype[] = ['f32', 'f16', 'bf16', 'q8_0'];

export type KvLayoutKind = 'kv' | 'mla';
export const KV_LAYOUT_KINDS: readonly KvLayoutKind[] = ['kv', 'mla'];

/**
 * Shape of one block's KV payload, as the engine exports and imports it:
 *
 * ```
 * kind 'kv' (absent):  for layer in 0..layers:  K[kvHead][token][headDim], then V[kvHead][token][headDim]
 * kind 'mla':          for layer in 0..layers:  latent[token][headDim]     (kvHeads 1; DeepSeek's
 *                      [c_kv | k_pe] row — V is a prefix of it, so there is no second half)
 * ```
 *
 * `q8_0` rows are ggml blocks of 32 values: an f16 scale then 32 int8 (34 bytes).
 * The tier does not interpret the payload; the kind only sizes it and keeps
 * layouts of different kinds apart.
 */
export interface KvLayout {
  layers: number;
  kvHeads: number;
  headDim: number;
  dtype: KvDtype;
  tokensPerBlock: number;
  kind?: KvLayoutKind;
}

/** Bytes of KV for one token: (2 for K and V | 1 for a latent row) × layers × kvHeads × bytes of one headDim row. */
export function kvBytesPerToken(layout: KvLayout): number {
  return (layout.kind === 'mla' ? 1 : 2) * layout.layers * layout.kvHeads * rowBytes(layout);
}

export function payloadBytesFor(layout: KvLayout, tokenCount: number): number {
  return kvBytesPerToken(layout) * tokenCount;
}

function rowBytes(layout: KvLayout): number {
  switch (layout.dtype) {
    case 'f32':
      return layout.headDim * 4;
    case 'f16':
    case 'bf16':
      return layout.headDim * 2;
    case 'q8_0':
      return (layout.headDim / 32) * 34;
  }
}

const U16 = 0xffff;

const SIZE_FIELDS = ['layers', 'kvHeads', 'headDim', 'tokensPerBlock'] as const;

/** Module-level (assertValidLayout runs per block encoded: no closure per call, which tsx would also name by a helper call). */
function badLayout(layout: unknown, what: string): never {
  throw new BlockError('KVT_ERR_BLOCK_BAD_LAYOUT', `invalid KV layout: ${what} (got ${JSON.stringify(layout)})`);
}

/** Throws KVT_ERR_BLOCK_BAD_LAYOUT unless every field is in range. */
export function assertValidLayout(layout: KvLayout): void {
  if (typeof layout !== 'object' || layout === null) badLayout(layout, 'layout must be an object {layers, kvHeads, headDim, dtype, tokensPerBlock}');
  for (const field of SIZE_FIELDS) {
    const value = layout[field];
    if (!Number.isInteger(value) || value < 1 || value > U16 * 16) badLayout(layout, `${field} must be a positive integer`);
  }
  if (!KV_DTYPES.includes(layout.dtype)) badLayout(layout, `dtype must be one of ${KV_DTYPES.join(', ')}`);
  if (layout.kind !== undefined && !KV_LAYOUT_KINDS.includes(layout.kind)) badLayout(layout, `kind must be one of ${KV_LAYOUT_KINDS.join(', ')} (or absent for kv)`);
  if (layout.dtype === 'q8_0' && layout.headDim % 32 !== 0) badLayout(layout, 'q8_0 needs headDim to be a multiple of 32');
  // One latent row per token and layer: the native codecs and the engine's pages size an mla block by layers alone.
  if (layout.kind === 'mla' && layout.kvHeads !== 1) badLayout(layout, 'mla layouts have kvHeads 1 (one latent row per token and layer)');
}

export function sameLayout(a: KvLayout, b: KvLayout): boolean {
  return (
    a.layers === b.layers && a.kvHeads === b.kvHeads && a.headDim === b.headDim && a.dtype === b.dtype && a.tokensPerBlock === b.tokensPerBlock &&
    (a.kind ?? 'kv') === (b.kind ?? 'kv')
  );
}
