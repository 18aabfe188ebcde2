/**
 * A unit: the complete engine state of a sequence at position p, split into
 * what is block-concatenable and one tail (issue #26). What a continuation
 * from p reads, and nothing else:
 *
 *   block layers  (full attention: llama, qwen, gemma3's global layers, gpt-oss's full layers)
 *                 K/V of every token [0, p): floor(p/64) full 64-token blocks,
 *                 each [blockLayer][K|V][kvHead][64][headDim] — exactly the
 *                 block payload of a K|V layout over those layers, shared by
 *                 every unit on the prefix — plus the tokens after the last
 *                 full block in the tail's `partial-kv` section.
 *   conv layers   (lfm2's short convolutions, L taps) the last L − 1 inputs
 *                 per channel, f32, as the graph holds them: tail section `conv`.
 *   window layers (gemma3's and gpt-oss's sliding layers, window W) K/V of the last
 *                 min(p, W − 1) tokens only: the next query (position p)
 *                 attends keys p − W < j ≤ p and key p is its own, later
 *                 queries reach back less. Tail section `window-kv`,
 *                 [windowLayer][K|V][kvHead][w][headDim].
 *   deepseek4     its full pages (the compressed entries and indexer keys of the
 *                 groups that end in each block) are the blocks; the SWA windows,
 *                 unfinished compressor groups, the partial block's entries and
 *                 the MTP window are `recurrent` sections (deepseek4-unit.ts).
 *
 * Sections are in the pool's dtype and element order, so a tail section is
 * shaped like a block payload of `tokens` tokens (src/kvtier/tail-codec.ts
 * stores and compresses it as one). Import assembles whole pages on the host
 * (slots no layer will read are zero) and writes each page once
 * (Sequence.importPages): a unit imported into a fresh sequence and continued
 * gives the same bits as the sequence it came from (unit-state.test.ts).
 */
import { EngineError } from './engine-errors.ts';
import type { Engine } from './engine.ts';
import type { Sequence } from './sequence.ts';
import { TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import { blockOfPage, moveTokens, runBytes, unitBlockBytes, unitShapeOf } from './unit-shape.ts';
import type { Deepseek4GraphConfig } from './deepseek4-graph.ts';
import { deepseek4FromUnit, deepseek4TailSections, deepseek4UnitBlocks } from './deepseek4-unit.ts';

/** 'recurrent': [layer][rows][width] f32 state at p (deepseek4's windows and compressor rows, deepseek4-unit.ts). */
export type TailSectionKind = 'partial-kv' | 'window-kv' | 'recurrent' | 'conv';

export interface TailSection {
  kind: TailSectionKind;
  /** Layers in the section, in order (engine layer indices). */
  layers: number[];
  /** Position of the section's first token. */
  firstToken: number;
  tokens: number;
  /** kv kinds: [layer][K|V][kvHead][tokens][headDim] in the pool dtype; conv: [layer][rows][width] f32 (firstToken p, tokens 1). */
  bytes: Uint8Array;
}

export interface EngineUnit {
  /** p: tokens the unit covers. */
  position: number;
  /** floor(p/64) payloads of the block layers. */
  blocks: Uint8Array[];
  tail: TailSection[];
}

type UnitEngine = Pick<Engine, 'kvLayout' | 'graphConfig' | 'recurrentState' | 'setRecurrentState' | 'unitState' | 'setUnitState' | 'hasMtp'>;

const dsv4 = (engine: Pick<Engine, 'graphConfig'>): Deepseek4GraphConfig | null => (engine.graphConfig.architecture === 'deepseek4' ? (engine.graphConfig as Deepseek4GraphConfig) : null);

/**
 * Block payloads [from, to) of the unit layers (block layers only): what a
 * unit-served writer stores as its blocks. Whole pages when the state is the
 * chain of blocks; gemma3's global layers only (its window layers are in
 * every tail).
 */
export function exportUnitBlocks(engine: Pick<Engine, 'kvLayout' | 'graphConfig'>, seq: Sequence, from: number, to: number): Uint8Array[] {
  const d = dsv4(engine);
  if (d) return deepseek4UnitBlocks(d.cfg, d.pages, seq.exportBlocks(from, to), from);
  const s = unitShapeOf(engine);
  return seq.exportBlocks(from, to).map((pg) => blockOfPage(s, pg));
}

/** The unit at the sequence's current length. */
export function exportUnit(engine: UnitEngine, seq: Sequence): EngineUnit {
  const s = unitShapeOf(engine);
  const tail = exportUnitTail(engine, seq);
  const full = Math.floor(tail.position / TOKENS_PER_BLOCK);
  if (dsv4(engine)) return { position: tail.position, blocks: full > 0 ? exportUnitBlocks(engine, seq, 0, full) : [], tail: tail.sections };
  const blocks = full > 0 ? seq.exportBlocks(0, full).map((pg) => blockOfPage(s, pg)) : [];
  return { position: tail.position, blocks, tail: tail.sections };
}

/** A tail section with its shape: kvHeads/headDim for kv kinds, rows/width for state kinds (the tail file's section record). */
export interface ShapedTailSection extends TailSection {
  kvHeads: number;
  headDim: number;
}

/**
 * The tail of the unit at the sequence's current length, without its blocks
 * (a writer stores those as ordinary blocks): reads only the pages the tail
 * sections touch. Same sections as exportUnit's, with their shapes.
 */
export function exportUnitTail(engine: UnitEngine, seq: Sequence): { position: number; dtype: 'f16' | 'f32'; sections: ShapedTailSection[] } {
  const s = unitShapeOf(engine);
  const p = seq.length;
  if (p === 0) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'an empty sequence has no unit');
  const d = dsv4(engine);
  if (d) {
    const st = engine.unitState(seq);
    if (!st || st.pos !== p) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `sequence ${seq.id} holds ${p} tokens but its deepseek4 state is ${st ? `at ${st.pos}` : 'missing'}`);
    return { position: p, dtype: 'f32', sections: deepseek4TailSections(d.cfg, st) };
  }
  const full = Math.floor(p / TOKENS_PER_BLOCK);
  const w = s.windowLayers.length > 0 ? Math.min(p, s.window - 1) : 0;
  const firstPage = Math.floor(Math.min(full * TOKENS_PER_BLOCK, p - w) / TOKENS_PER_BLOCK);
  const pages = p > full * TOKENS_PER_BLOCK || w > 0 ? seq.exportPages(firstPage) : [];
  const sections: ShapedTailSection[] = [];
  const r = p - full * TOKENS_PER_BLOCK;
  if (r > 0) {
    const bytes = new Uint8Array(s.blockLayers.length * 2 * s.kvHeads * runBytes(s, r));
    moveTokens(s, pages, s.blockLayers, full * TOKENS_PER_BLOCK, r, bytes, false);
    sections.push({ kind: 'partial-kv', layers: s.blockLayers, firstToken: full * TOKENS_PER_BLOCK, tokens: r, bytes, kvHeads: s.kvHeads, headDim: s.headDim });
  }
  if (w > 0) {
    const bytes = new Uint8Array(s.windowLayers.length * 2 * s.kvHeads * runBytes(s, w));
    moveTokens(s, pages, s.windowLayers, p - w, w, bytes, false);
    sections.push({ kind: 'window-kv', layers: s.windowLayers, firstToken: p - w, tokens: w, bytes, kvHeads: s.kvHeads, headDim: s.headDim });
  }
  if (s.conv) {
    const st = engine.recurrentState(seq);
    if (!st || st.position !== p) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `sequence ${seq.id} has no convolution state at ${p}`);
    const bytes = new Uint8Array(s.conv.layers.length * s.conv.rows * s.conv.width * 4);
    const f = new Float32Array(bytes.buffer);
    st.rows.forEach((row, i) => f.set(row, i * s.conv!.rows * s.conv!.width));
    sections.push({ kind: 'conv', layers: s.conv.layers, firstToken: p, tokens: 1, bytes, kvHeads: s.conv.rows, headDim: s.conv.width });
  }
  return { position: p, dtype: s.dtype, sections };
}

/**
 * Restores `unit` into the empty sequence `seq`. A unit of another shape
 * (layers, window, sizes) is a typed KVT_ERR_ENGINE_BAD_BLOCK: the caller
 * treats it as a miss.
 */
export function importUnit(engine: UnitEngine, seq: Sequence, unit: EngineUnit): void {
  const s = unitShapeOf(engine);
  const p = unit.position;
  const bad = (why: string): never => {
    throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', `unit at ${p} does not fit this engine: ${why}; treat it as a miss`);
  };
  if (!Number.isInteger(p) || p < 1) bad('position');
  const d = dsv4(engine);
  if (d) {
    const { state, pages } = deepseek4FromUnit(d.cfg, d.pages, engine.kvLayout.blockBytes, p, unit.blocks, unit.tail, engine.hasMtp);
    seq.importPages(pages, p);
    try {
      engine.setUnitState(seq, state);
    } catch (err) {
      seq.truncate(0);
      throw err;
    }
    return;
  }
  const full = Math.floor(p / TOKENS_PER_BLOCK);
  if (unit.blocks.length !== full) bad(`${unit.blocks.length} blocks, ${full} expected`);
  const blockBytes = unitBlockBytes(s);
  for (const b of unit.blocks) if (b.byteLength !== blockBytes) bad(`a block of ${b.byteLength} bytes, ${blockBytes} expected`);
  const r = p - full * TOKENS_PER_BLOCK;
  const w = s.windowLayers.length > 0 ? Math.min(p, s.window - 1) : 0;
  const want: Array<{ kind: TailSectionKind; layers: number[]; first: number; n: number }> = [];
  if (r > 0) want.push({ kind: 'partial-kv', layers: s.blockLayers, first: full * TOKENS_PER_BLOCK, n: r });
  if (s.windowLayers.length > 0) want.push({ kind: 'window-kv', layers: s.windowLayers, first: p - w, n: w });
  if (s.conv) want.push({ kind: 'conv', layers: s.conv.layers, first: p, n: 1 });
  if (unit.tail.length !== want.length) bad(`${unit.tail.length} tail sections, ${want.length} expected`);
  const pageBytes = engine.kvLayout.blockBytes;
  // Whole-page blocks with no window in the tail (lfm2): the full pages are the loaded blocks themselves
  // (importPages copies them into the pool; nothing below writes a page before the partial one), so the
  // import does not allocate, zero and copy the whole prefix a second time.
  const aliasBlocks = s.blockConcatenable && s.windowLayers.length === 0 && blockBytes === pageBytes;
  const pages = Array.from({ length: Math.ceil(p / TOKENS_PER_BLOCK) }, (_, i) => (aliasBlocks && i < full ? unit.blocks[i] : new Uint8Array(pageBytes)));
  const layerBytes = 2 * s.kvHeads * runBytes(s, TOKENS_PER_BLOCK);
  if (!aliasBlocks) {
    unit.blocks.forEach((b, i) => {
      if (s.blockConcatenable) pages[i].set(b);
      else s.blockLayers.forEach((l, j) => pages[i].set(b.subarray(j * layerBytes, (j + 1) * layerBytes), l * layerBytes));
    });
  }
  want.forEach((wnt, i) => {
    const sec = unit.tail[i];
    const size = wnt.kind === 'conv' ? wnt.layers.length * s.conv!.rows * s.conv!.width * 4 : wnt.layers.length * 2 * s.kvHeads * runBytes(s, wnt.n);
    if (sec.kind !== wnt.kind || sec.firstToken !== wnt.first || sec.tokens !== wnt.n || sec.bytes.byteLength !== size || sec.layers.join() !== wnt.layers.join()) {
      bad(`tail section ${i} is ${sec.kind} [${sec.firstToken}, +${sec.tokens}) of ${sec.bytes.byteLength} bytes, ${wnt.kind} [${wnt.first}, +${wnt.n}) of ${size} expected`);
    }
    if (wnt.kind !== 'conv') moveTokens(s, pages, wnt.layers, wnt.first, wnt.n, sec.bytes, true);
  });
  seq.importPages(pages, p);
  const conv = unit.tail.find((t) => t.kind === 'conv');
  if (s.conv && conv) {
    const per = s.conv.rows * s.conv.width;
    const f = new Float32Array(conv.bytes.buffer.slice(conv.bytes.byteOffset, conv.bytes.byteOffset + conv.bytes.byteLength));
    try {
      engine.setRecurrentState(seq, { position: p, layers: s.conv.layers, rows: s.conv.layers.map((_, i) => f.slice(i * per, (i + 1) * per)) });
    } catch (err) {
      seq.truncate(0);
      throw err;
    }
  }
}
