/**
 * The sections of a unit's tail file (tail-codec.ts has the format table):
 * their kinds, their record, their sizes, the checks a section passes before
 * it is encoded and the writing of its table entry.
 */
import { align } from './kv-file-frame.ts';
import type { KvDtype, KvLayout } from './kv-layout.ts';

export const U16 = 0xffff;

export const TAIL_SECTION_KINDS = ['partial-kv', 'window-kv', 'recurrent', 'conv'] as const;
export type TailSectionKind = (typeof TAIL_SECTION_KINDS)[number];
export const isKv = (k: TailSectionKind) => k === 'partial-kv' || k === 'window-kv';

export interface TailSectionRecord {
  kind: TailSectionKind;
  /** Engine layer indices, ascending. */
  layers: number[];
  /** kv kinds: kv heads; state kinds: rows. */
  kvHeads: number;
  /** kv kinds: head dim; state kinds: width (f32 values per row). */
  headDim: number;
  firstToken: number;
  tokens: number;
  /** Raw bytes (see the format table). */
  bytes: Uint8Array;
}

/** A kv section as a block layout of `tokens` tokens, so the block codecs apply unchanged. */
export function sectionLayout(s: Pick<TailSectionRecord, 'layers' | 'kvHeads' | 'headDim' | 'tokens'>, dtype: KvDtype): KvLayout {
  return { layers: s.layers.length, kvHeads: s.kvHeads, headDim: s.headDim, dtype, tokensPerBlock: Math.max(1, s.tokens) };
}

/** Bytes of a section as the engine hands it (raw, before any codec). */
export function rawBytes(kind: TailSectionKind, s: Pick<TailSectionRecord, 'layers' | 'kvHeads' | 'headDim' | 'tokens'>, dtype: KvDtype): number {
  if (!isKv(kind)) return s.layers.length * s.kvHeads * s.headDim * 4;
  const elem = dtype === 'f32' ? 4 : dtype === 'q8_0' ? 34 / 32 : 2;
  return s.layers.length * 2 * s.kvHeads * s.tokens * s.headDim * elem;
}

/** Bytes of a section table entry with `layers` layer indices. */
export const entryBytes = (layers: number) => 16 + align(2 * layers, 4);

/** A section as handed to encode: its kind, layers, shape, token range against the unit's position, and byte count. */
export function checkSection(s: TailSectionRecord, position: number, dtype: KvDtype, bad: (what: string) => never): void {
  if (!TAIL_SECTION_KINDS.includes(s.kind)) bad(`section kind ${s.kind}`);
  if (s.layers.length === 0 || s.layers.length > U16 || s.layers.some((l, i) => !Number.isInteger(l) || l < 0 || l > U16 || (i > 0 && l <= s.layers[i - 1]))) bad('section layers must be ascending u16 indices');
  for (const v of [s.kvHeads, s.headDim]) if (!Number.isInteger(v) || v < 1 || v > U16) bad('section kvHeads/headDim (rows/width) must be 1..65535');
  if (!Number.isInteger(s.tokens) || s.tokens < (isKv(s.kind) ? 1 : 1) || !Number.isInteger(s.firstToken) || s.firstToken < 0) bad('section tokens / first token');
  if (isKv(s.kind) && s.firstToken + s.tokens > position) bad(`a ${s.kind} section ends past the unit's position`);
  if (!isKv(s.kind) && (s.tokens !== 1 || s.firstToken !== position)) bad(`a ${s.kind} section is the state at p: first token p, tokens 1`);
  if (!(s.bytes instanceof Uint8Array) || s.bytes.byteLength !== rawBytes(s.kind, s, dtype)) bad(`a ${s.kind} section of ${s.bytes?.byteLength} bytes, its shape needs ${rawBytes(s.kind, s, dtype)}`);
}

/** Writes a section's table entry at `at` (its layer list included; see the format table). */
export function writeSectionEntry(view: DataView, at: number, s: TailSectionRecord, compressed: boolean): void {
  view.setUint8(at, TAIL_SECTION_KINDS.indexOf(s.kind));
  view.setUint8(at + 1, compressed ? 1 : 0);
  view.setUint16(at + 2, s.layers.length, true);
  view.setUint16(at + 4, s.kvHeads, true);
  view.setUint16(at + 6, s.headDim, true);
  view.setUint32(at + 8, s.firstToken, true);
  view.setUint32(at + 12, s.tokens, true);
  s.layers.forEach((l, j) => view.setUint16(at + 16 + 2 * j, l, true));
}
