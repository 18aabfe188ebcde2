/**
 * A deepseek4 unit (issue #26): the state after exactly p tokens, split into
 * blocks and one tail.
 *
 * Blocks: the sequence's pool pages of its full 64-token blocks
 * (deepseek4-pages.ts). A page holds the compressed entries and indexer keys
 * of the groups that END in its block, and nothing else; a group that ends in
 * block b is finished once b is full and depends only on tokens before b's
 * end, so full pages are block-concatenable: the block at b is the same bytes
 * for every prefix through b, shared by every unit on that prefix. Exported
 * blocks are rebuilt from the used slots only (zero elsewhere), so a block's
 * bytes depend on its tokens alone, never on what a reused pool page held.
 *
 * Tail: everything else the next token reads, f32, as `recurrent` sections
 * ([layers][rows][width], first token p, tokens 1) in this order — a pure
 * function of (config, p, MTP on) that import checks section by section:
 *
 *   window     trunk layers 0..n−1; rows min(p, n_swa); width head_dim:
 *              the SWA window's roped keys, positions p−rows..p−1
 *   per distinct compress ratio r (ascending), over the layers of ratio r:
 *   rows r     rows p − start, start = ⌊p/r⌋·r (HCA) or (⌊p/r⌋−1)·r ≥ 0 (CSA,
 *              r = 4: the next group's overlap half); width: HCA 2·head_dim
 *              [kv | score]; CSA 4·head_dim + 4·indexer_dim [kv | score |
 *              indexer kv | indexer score] — the unfinished group's
 *              compressor rows (left out when there are none)
 *   entries r  the entries finished inside the partial block (its page is not
 *              a block): ⌊p/r⌋ − ⌊64·⌊p/64⌋/r⌋ rows of [entry | indexer key
 *              (r = 4)] (left out when none; never for r = 128)
 *   with MTP drafting on, layer n (the MTP block):
 *   mtp window rows min(p, n_swa), width head_dim: the MTP block's own window
 *   h last     rows hc, width n_embd: the trunk's hidden state after token p−1
 *
 * Bytes per unit are therefore bounded by the window and the unfinished groups,
 * not by p (deepseek4TailBytes). A unit without the MTP sections is refused by
 * an engine that drafts with MTP (a miss); one with them serves an engine
 * without (they are skipped).
 */
import { EngineError } from './engine-errors.ts';
import { TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import type { Deepseek4PageLayout } from './deepseek4-pages.ts';
import { Deepseek4State, emptyLayerState, type Deepseek4LayerState } from './deepseek4-state.ts';

/** A tail section as unit-state.ts carries it (kvHeads = rows, headDim = width for state kinds). */
export interface Deepseek4TailSection {
  kind: 'recurrent';
  layers: number[];
  firstToken: number;
  tokens: number;
  bytes: Uint8Array;
  kvHeads: number;
  headDim: number;
}

type Part = 'window' | 'rows' | 'entries' | 'mtp-window' | 'h-last';
interface Spec {
  part: Part;
  ratio: number;
  layers: number[];
  rows: number;
  width: number;
}

/** The sections of a unit at p, in order (see the file comment). */
function tailSpec(c: Deepseek4Config, p: number, mtp: boolean): Spec[] {
  const D = c.headDim;
  const w = Math.min(p, c.nSwa);
  const trunk = Array.from({ length: c.nLayer }, (_, l) => l);
  const out: Spec[] = [{ part: 'window', ratio: 0, layers: trunk, rows: w, width: D }];
  const full = Math.floor(p / TOKENS_PER_BLOCK) * TOKENS_PER_BLOCK;
  for (const r of [...new Set(c.ratios.slice(0, c.nLayer))].filter((x) => x > 0).sort((a, b) => a - b)) {
    const layers = trunk.filter((l) => c.ratios[l] === r);
    const csa = r === 4;
    const start = csa ? Math.max(0, (Math.floor(p / r) - 1) * r) : Math.floor(p / r) * r;
    if (p > start) out.push({ part: 'rows', ratio: r, layers, rows: p - start, width: csa ? 4 * D + 4 * c.indexerDim : 2 * D });
    const partial = Math.floor(p / r) - Math.floor(full / r);
    if (partial > 0) out.push({ part: 'entries', ratio: r, layers, rows: partial, width: D + (csa ? c.indexerDim : 0) });
  }
  if (mtp) {
    out.push({ part: 'mtp-window', ratio: 0, layers: [c.nLayer], rows: w, width: D });
    out.push({ part: 'h-last', ratio: 0, layers: [c.nLayer], rows: c.hc, width: c.nEmbd });
  }
  return out;
}

/** Bytes of the tail of a unit at p (f32 payload, before the file's header and table). */
export function deepseek4TailBytes(c: Deepseek4Config, p: number, mtp = false): number {
  return tailSpec(c, p, mtp).reduce((a, s) => a + s.layers.length * s.rows * s.width * 4, 0);
}

const stateError = (why: string): never => {
  throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `deepseek4 unit: ${why}`);
};

/** The tail sections of `st` (the state after st.pos tokens). */
export function deepseek4TailSections(c: Deepseek4Config, st: Deepseek4State): Deepseek4TailSection[] {
  const p = st.pos;
  const D = c.headDim;
  const full = Math.floor(p / TOKENS_PER_BLOCK) * TOKENS_PER_BLOCK;
  return tailSpec(c, p, st.mtp !== null).map((s) => {
    const f = new Float32Array(s.layers.length * s.rows * s.width);
    s.layers.forEach((l, i) => {
      const at = (r: number) => (i * s.rows + r) * s.width;
      // the MTP window's keys: the graph computes the missing ones before it hands out the state (mtpKeys)
      const ls = s.part === 'mtp-window' ? { ...emptyLayerState(), ...st.mtp!.keyed() } : st.layers[l]!;
      if (s.part === 'window' || s.part === 'mtp-window') {
        if (ls.raw.length !== s.rows || ls.rawPos[0] !== p - s.rows) stateError(`layer ${l}'s window holds ${ls.raw.length} keys from ${ls.rawPos[0]}, ${s.rows} from ${p - s.rows} expected`);
        ls.raw.forEach((k, r) => f.set(k, at(r)));
      } else if (s.part === 'h-last') {
        if (!st.hLast || st.hLast.length !== s.rows * s.width) stateError('no trunk hidden state for the MTP block');
        f.set(st.hLast!, at(0));
      } else if (s.part === 'rows') {
        if (ls.compKv.size !== s.rows) stateError(`layer ${l} holds ${ls.compKv.size} compressor rows, ${s.rows} expected`);
        for (let r = 0; r < s.rows; r++) {
          const pos = p - s.rows + r;
          const parts = s.ratio === 4 ? [ls.compKv, ls.compScore, ls.idxKv, ls.idxScore] : [ls.compKv, ls.compScore];
          let o = at(r);
          for (const m of parts) {
            const v = m.get(pos) ?? stateError(`layer ${l} has no compressor row at ${pos}`);
            f.set(v, o);
            o += v.length;
          }
        }
      } else {
        const k0 = Math.floor(full / s.ratio);
        for (let r = 0; r < s.rows; r++) {
          f.set(ls.entries[k0 + r] ?? stateError(`layer ${l} has no entry ${k0 + r}`), at(r));
          if (s.ratio === 4) f.set(ls.idxKeys[k0 + r] ?? stateError(`layer ${l} has no indexer key ${k0 + r}`), at(r) + D);
        }
      }
    });
    return { kind: 'recurrent', layers: s.layers, firstToken: p, tokens: 1, bytes: new Uint8Array(f.buffer), kvHeads: s.rows, headDim: s.width };
  });
}

/** Entries k of a ratio-r layer that end inside block b (deepseek4-pages.ts: entry k ends at (k+1)·r − 1). */
function entriesOfBlock(r: number, b: number): [number, number] {
  return [Math.ceil((b * TOKENS_PER_BLOCK + 1) / r) - 1, Math.floor(((b + 1) * TOKENS_PER_BLOCK) / r) - 1];
}

function f32(bytes: Uint8Array): Float32Array {
  const b = bytes.byteOffset % 4 === 0 ? bytes : bytes.slice();
  return new Float32Array(b.buffer, b.byteOffset, b.byteLength >> 2);
}

/** Copy `width` floats of each used slot of block b from `src` to `dst` (both whole pages). */
function copySlots(c: Deepseek4Config, pl: Deepseek4PageLayout, b: number, src: Float32Array, dst: Float32Array): void {
  for (let l = 0; l < c.nLayer; l++) {
    const r = c.ratios[l]!;
    if (r === 0) continue;
    const [k0, k1] = entriesOfBlock(r, b);
    for (let k = k0; k <= k1; k++) {
      for (const [off, width] of [[pl.entryOffset[l]!, c.headDim], [pl.keyOffset[l]!, c.indexerDim]] as const) {
        if (off < 0) continue;
        const at = off + (k % pl.slots[l]!) * width;
        dst.set(src.subarray(at, at + width), at);
      }
    }
  }
}

/** Block payloads of full pages (page i is block from + i): the used slots, zero elsewhere. */
export function deepseek4UnitBlocks(c: Deepseek4Config, pl: Deepseek4PageLayout, pages: Uint8Array[], from: number): Uint8Array[] {
  return pages.map((pg, i) => {
    const out = new Uint8Array(pg.byteLength);
    copySlots(c, pl, from + i, f32(pg), new Float32Array(out.buffer));
    return out;
  });
}

/**
 * The state and pages of a unit (blocks: its ⌊p/64⌋ block payloads of
 * `pageBytes` each; tail: its sections). A unit of another shape is a typed
 * KVT_ERR_ENGINE_BAD_BLOCK (the caller treats it as a miss).
 */
export function deepseek4FromUnit(
  c: Deepseek4Config,
  pl: Deepseek4PageLayout,
  pageBytes: number,
  p: number,
  blocks: Uint8Array[],
  tail: ReadonlyArray<{ kind: string; layers: number[]; firstToken: number; tokens: number; bytes: Uint8Array; kvHeads?: number; headDim?: number }>,
  mtp: boolean,
): { state: Deepseek4State; pages: Uint8Array[] } {
  const bad = (why: string): never => {
    throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', `deepseek4 unit at ${p} does not fit this engine: ${why}; treat it as a miss`);
  };
  if (!Number.isInteger(p) || p < 1) bad('position');
  const nFull = Math.floor(p / TOKENS_PER_BLOCK);
  if (blocks.length !== nFull) bad(`${blocks.length} blocks, ${nFull} expected`);
  for (const b of blocks) if (b.byteLength !== pageBytes) bad(`a block of ${b.byteLength} bytes, ${pageBytes} expected`);
  // a unit written with MTP on carries two more sections, which an engine without MTP skips
  const withMtp = tailSpec(c, p, true);
  const want = tailSpec(c, p, mtp);
  if (tail.length !== want.length && !(!mtp && tail.length === withMtp.length)) bad(`${tail.length} tail sections, ${want.length} expected${mtp ? ' (MTP drafting on: the unit must carry the MTP window)' : ''}`);
  const D = c.headDim;
  const st = new Deepseek4State(c.nLayer, mtp ? c.nSwa : 0);
  st.pos = p;
  const pageF = blocks.map(f32);
  const partial = p % TOKENS_PER_BLOCK > 0 ? new Float32Array(pageBytes >> 2) : null;
  const full = nFull * TOKENS_PER_BLOCK;
  want.forEach((s, i) => {
    const sec = tail[i]!;
    const size = s.layers.length * s.rows * s.width * 4;
    if (sec.kind !== 'recurrent' || sec.firstToken !== p || sec.tokens !== 1 || sec.bytes.byteLength !== size || sec.layers.join() !== s.layers.join() || (sec.kvHeads ?? s.rows) !== s.rows || (sec.headDim ?? s.width) !== s.width) {
      bad(`tail section ${i} is ${sec.kind} of layers [${sec.layers.join()}] with ${sec.bytes.byteLength} bytes; a ${s.part} section of [${s.layers.join()}], ${s.rows} × ${s.width} f32 expected`);
    }
    const f = f32(sec.bytes);
    s.layers.forEach((l, li) => {
      const row = (r: number, from = 0, n = s.width) => f.slice((li * s.rows + r) * s.width + from, (li * s.rows + r) * s.width + from + n);
      const ls: Deepseek4LayerState = st.layers[l] ?? emptyLayerState();
      if (s.part === 'mtp-window') {
        // keys without their inputs (token −1): enough to draft from, not to key again
        st.mtp!.push(Array.from({ length: s.rows }, (_, r) => ({ token: -1, hPrev: null, key: row(r) })), p - s.rows);
      } else if (s.part === 'window') {
        for (let r = 0; r < s.rows; r++) {
          ls.raw.push(row(r));
          ls.rawPos.push(p - s.rows + r);
        }
      } else if (s.part === 'h-last') st.hLast = f.slice(0, s.rows * s.width);
      else if (s.part === 'rows') {
        const parts = s.ratio === 4 ? ([[ls.compKv, 2 * D], [ls.compScore, 2 * D], [ls.idxKv, 2 * c.indexerDim], [ls.idxScore, 2 * c.indexerDim]] as const) : ([[ls.compKv, D], [ls.compScore, D]] as const);
        for (let r = 0; r < s.rows; r++) {
          let o = 0;
          for (const [m, width] of parts) {
            m.set(p - s.rows + r, row(r, o, width));
            o += width;
          }
        }
      } else {
        const k0 = Math.floor(full / s.ratio);
        for (let r = 0; r < s.rows; r++) {
          ls.entries[k0 + r] = row(r, 0, D);
          if (s.ratio === 4) ls.idxKeys[k0 + r] = row(r, D, c.indexerDim);
        }
      }
    });
  });
  // entries of finished groups that end in full blocks: read back from their pages
  for (let l = 0; l < c.nLayer; l++) {
    const r = c.ratios[l]!;
    if (r === 0) continue;
    const ls = st.layers[l]!;
    for (let k = 0; k < Math.floor(full / r); k++) {
      const page = pageF[Math.floor(((k + 1) * r - 1) / TOKENS_PER_BLOCK)]!;
      const slot = k % pl.slots[l]!;
      ls.entries[k] = page.slice(pl.entryOffset[l]! + slot * D, pl.entryOffset[l]! + (slot + 1) * D);
      if (r === 4) ls.idxKeys[k] = page.slice(pl.keyOffset[l]! + slot * c.indexerDim, pl.keyOffset[l]! + (slot + 1) * c.indexerDim);
    }
    if (ls.entries.length !== Math.floor(p / r) || ls.entries.some((e) => e === undefined)) bad(`layer ${l} would hold ${ls.entries.length} entries, ${Math.floor(p / r)} expected`);
  }
  // the partial block's page: its finished entries in their slots (the next forward reads the state's arrays)
  if (partial) {
    const src = new Float32Array(partial.length);
    for (let l = 0; l < c.nLayer; l++) {
      const r = c.ratios[l]!;
      if (r === 0) continue;
      const ls = st.layers[l]!;
      for (let k = Math.floor(full / r); k < Math.floor(p / r); k++) {
        const slot = k % pl.slots[l]!;
        src.set(ls.entries[k]!, pl.entryOffset[l]! + slot * D);
        if (r === 4) src.set(ls.idxKeys[k]!, pl.keyOffset[l]! + slot * c.indexerDim);
      }
    }
    copySlots(c, pl, nFull, src, partial);
  }
  const pages = blocks.map((b) => b.slice());
  if (partial) pages.push(new Uint8Array(partial.buffer));
  return { state: st, pages };
}

