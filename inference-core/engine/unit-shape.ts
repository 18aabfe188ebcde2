/**
 * The shape of an engine's state as units see it (unit-state.ts): which
 * layers are blocks, which are windows or convolution state, and the byte
 * layout of a K|V page that sections and block payloads are cut from.
 */
import { EngineError } from './engine-errors.ts';
import type { Engine } from './engine.ts';
import { TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import type { Gemma3GraphConfig } from './gemma3-graph.ts';
import type { GptOssGraphConfig } from './gptoss-graph.ts';
import type { Lfm2GraphConfig } from './lfm2-graph.ts';

/** How an engine's state splits into blocks and a tail. */
export interface UnitShape {
  /** True when the tail is at most the partial block: the state is the chain of blocks (full attention). */
  blockConcatenable: boolean;
  blockLayers: number[];
  windowLayers: number[];
  /** Sliding window W of the window layers (0: none). */
  window: number;
  kvHeads: number;
  headDim: number;
  dtype: 'f16' | 'f32';
  /** lfm2: the convolution state at p, per conv layer [rows][width] f32 (tail section `conv`). */
  conv?: { layers: number[]; rows: number; width: number };
}

export function unitShapeOf(engine: Pick<Engine, 'kvLayout' | 'graphConfig'>): UnitShape {
  const lay = engine.kvLayout;
  if (lay.kind === 'mla') throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', 'units of an MLA (deepseek2) engine are not built yet; its blocks are its whole state');
  const all = Array.from({ length: lay.layers }, (_, i) => i);
  const g = engine.graphConfig;
  // deepseek4: one pseudo-layer page (deepseek4-pages.ts) is the block; the rest is recurrent sections
  if (g.architecture === 'deepseek4') return { blockConcatenable: false, blockLayers: all, windowLayers: [], window: 0, kvHeads: lay.kvHeads, headDim: lay.headDim, dtype: lay.dtype };
  // gemma3 (5 sliding : 1 global) and gpt-oss (alternating): full layers as blocks, sliding windows in the tail
  if ((g.architecture === 'gemma3' || g.architecture === 'gpt-oss') && (g as Gemma3GraphConfig | GptOssGraphConfig).slidingWindow > 0) {
    const c = g as Gemma3GraphConfig | GptOssGraphConfig;
    return {
      blockConcatenable: false,
      blockLayers: all.filter((l) => !c.swaLayers[l]),
      windowLayers: all.filter((l) => c.swaLayers[l]),
      window: c.slidingWindow,
      kvHeads: lay.kvHeads,
      headDim: lay.headDim,
      dtype: lay.dtype,
    };
  }
  if (g.architecture === 'lfm2') {
    // pool layers are the attention layers; the convolution layers' state is the tail's `conv` section
    const c = g as Lfm2GraphConfig;
    const conv = c.poolLayer.flatMap((p, l) => (p < 0 ? [l] : []));
    return { blockConcatenable: false, blockLayers: all, windowLayers: [], window: 0, kvHeads: lay.kvHeads, headDim: lay.headDim, dtype: lay.dtype, conv: { layers: conv, rows: c.convL - 1, width: c.dim } };
  }
  return { blockConcatenable: true, blockLayers: all, windowLayers: [], window: 0, kvHeads: lay.kvHeads, headDim: lay.headDim, dtype: lay.dtype };
}

/**
 * Whether a unit (blocks + tail) holds the whole state of this engine: true for
 * block-only models, gemma3, lfm2 (its convolution rows are the tail's `conv`
 * section) and deepseek4 (deepseek4-unit.ts); false for any other graph that
 * keeps state outside its pages, which must not be served from units.
 */
export function unitsCoverState(engine: Pick<Engine, 'kvLayout' | 'graphConfig' | 'hasRecurrentState'>): boolean {
  if (engine.kvLayout.kind === 'mla') return false;
  const arch = engine.graphConfig.architecture;
  return !engine.hasRecurrentState || arch === 'lfm2' || arch === 'deepseek4';
}

/**
 * How a model is served from the tier: 'blocks' when its state is the chain of
 * its whole-page blocks (full attention, MLA); 'units' when a unit (blocks of
 * the block layers + a tail) holds it all — gemma3's sliding layers, lfm2's
 * convolution state, deepseek4's windows and compressor rows (its entry pages
 * are the blocks); 'off' when neither does (an MLA model with state outside
 * its pages). `blockLayers`: the layers a unit's blocks hold.
 */
export function unitServingOf(engine: Pick<Engine, 'kvLayout' | 'graphConfig' | 'hasRecurrentState'>): { mode: 'blocks' | 'units' | 'off'; blockLayers: number } {
  const layers = engine.kvLayout.layers;
  if (engine.kvLayout.kind === 'mla') return { mode: engine.hasRecurrentState ? 'off' : 'blocks', blockLayers: layers };
  if (!unitsCoverState(engine)) return { mode: 'off', blockLayers: layers };
  const s = unitShapeOf(engine);
  if (s.blockConcatenable && !engine.hasRecurrentState) return { mode: 'blocks', blockLayers: layers };
  return { mode: 'units', blockLayers: s.blockLayers.length };
}

/** Bytes of one (layer, K|V, head) run of `tokens` tokens. */
export function runBytes(s: UnitShape, tokens: number): number {
  return tokens * s.headDim * (s.dtype === 'f16' ? 2 : 4);
}

/** Byte offset of (layer, kv, head, slot) in a page of `layers` layers. */
function pageOffset(s: UnitShape, layer: number, kv: number, head: number, slot: number): number {
  return ((((layer * 2 + kv) * s.kvHeads + head) * TOKENS_PER_BLOCK + slot) * s.headDim) * (s.dtype === 'f16' ? 2 : 4);
}

/** Tokens [first, first+n) of `layers` from pages (by token) into a section buffer, or back with `toPages`. */
export function moveTokens(s: UnitShape, pages: Uint8Array[], layers: number[], first: number, n: number, section: Uint8Array, toPages: boolean): void {
  const tokBytes = runBytes(s, 1);
  let off = 0;
  for (const layer of layers)
    for (let kv = 0; kv < 2; kv++)
      for (let h = 0; h < s.kvHeads; h++) {
        // a run of n tokens may cross pages: copy page by page
        let t = first;
        while (t < first + n) {
          const page = Math.floor(t / TOKENS_PER_BLOCK);
          const slot = t % TOKENS_PER_BLOCK;
          const cnt = Math.min(first + n - t, TOKENS_PER_BLOCK - slot);
          const at = pageOffset(s, layer, kv, h, slot);
          if (toPages) pages[page].set(section.subarray(off, off + cnt * tokBytes), at);
          else section.set(pages[page].subarray(at, at + cnt * tokBytes), off);
          off += cnt * tokBytes;
          t += cnt;
        }
      }
}

/** Block payload (block layers only) of a whole page. */
export function blockOfPage(s: UnitShape, page: Uint8Array): Uint8Array {
  const layerBytes = 2 * s.kvHeads * runBytes(s, TOKENS_PER_BLOCK);
  if (s.blockConcatenable) return page;
  const out = new Uint8Array(s.blockLayers.length * layerBytes);
  s.blockLayers.forEach((l, i) => out.set(page.subarray(l * layerBytes, (l + 1) * layerBytes), i * layerBytes));
  return out;
}

/** Bytes of one block payload of this shape. */
export function unitBlockBytes(s: UnitShape): number {
  return s.blockLayers.length * 2 * s.kvHeads * runBytes(s, TOKENS_PER_BLOCK);
}
