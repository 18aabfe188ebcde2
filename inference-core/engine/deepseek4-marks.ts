/**
 * Exact rollback of a deepseek4 sequence's state over the last rows a forward
 * fed (a rejected speculative draft): the SWA window, the compressor rows of
 * the unfinished groups, the compressed entries and indexer keys, the MTP
 * block's window and the trunk's last hidden state (these two from the rows
 * the MTP window keeps, deepseek4-mtp-window.ts: no mark needed).
 *
 * A truncation cannot be recomputed from what the state keeps: the window has
 * already shifted out the keys the shorter sequence needs and a finished group
 * has dropped its compressor rows. So the forward marks the state after each of
 * its last ROLLBACK_ROWS rows (and before its first when it fed no more):
 * shallow copies — every row vector in the state is immutable once pushed (new
 * rows are fresh arrays; entries are only appended, so a mark keeps their
 * count) — and restoring a mark gives back exactly the state a run that never
 * fed the later rows holds.
 */
import type { Deepseek4LayerState, Deepseek4State } from './deepseek4-state.ts';

/** Rows a rollback may undo: one verification (the last token + drafts) with room to spare. */
export const ROLLBACK_ROWS = 16;

interface LayerMark {
  raw: Float32Array[];
  rawPos: number[];
  compKv: Map<number, Float32Array>;
  compScore: Map<number, Float32Array>;
  idxKv: Map<number, Float32Array>;
  idxScore: Map<number, Float32Array>;
  entries: number;
  idxKeys: number;
}

export interface StateMark {
  layers: (LayerMark | undefined)[];
}

export function markLayer(ls: Deepseek4LayerState): LayerMark {
  return {
    raw: ls.raw.slice(), rawPos: ls.rawPos.slice(), compKv: new Map(ls.compKv), compScore: new Map(ls.compScore),
    idxKv: new Map(ls.idxKv), idxScore: new Map(ls.idxScore), entries: ls.entries.length, idxKeys: ls.idxKeys.length,
  };
}

function restoreLayer(ls: Deepseek4LayerState, m: LayerMark): void {
  ls.raw = m.raw.slice();
  ls.rawPos = m.rawPos.slice();
  ls.compKv = new Map(m.compKv);
  ls.compScore = new Map(m.compScore);
  ls.idxKv = new Map(m.idxKv);
  ls.idxScore = new Map(m.idxScore);
  ls.entries.length = m.entries;
  ls.idxKeys.length = m.idxKeys;
}

/** The mark for "state after `pos` tokens", made on first use. */
export function markAt(st: Deepseek4State, pos: number): StateMark {
  let m = st.marks.get(pos);
  if (!m) {
    m = { layers: [] };
    st.marks.set(pos, m);
  }
  return m;
}

/** Marks the whole state as it is now (before a forward of at most ROLLBACK_ROWS rows). */
export function markWhole(st: Deepseek4State): void {
  const m = markAt(st, st.pos);
  st.layers.forEach((ls, l) => (m.layers[l] = markLayer(ls)));
}

/**
 * Rolls the state back to `pos` tokens when the last forward marked it (true),
 * else leaves it as it is (false: the next forward then refuses to continue it).
 */
export function rollbackTo(st: Deepseek4State, pos: number): boolean {
  if (pos === st.pos) return true;
  const m = st.marks.get(pos);
  if (!m || m.layers.length !== st.layers.length || m.layers.some((x) => x === undefined) || (st.mtp !== null && !st.mtp.canRollback(pos))) return false;
  st.layers.forEach((ls, l) => restoreLayer(ls, m.layers[l]!));
  if (st.mtp) st.hLast = st.mtp.rollback(pos, st.hLast);
  st.pos = pos;
  // marks past the new end describe rows that no longer exist
  for (const k of [...st.marks.keys()]) if (k > pos) st.marks.delete(k);
  return true;
}
