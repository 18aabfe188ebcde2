/**
 * Where a deepseek4 sequence's growing state lives in the engine's paged pool.
 *
 * A deepseek4 sequence's state (deepseek4-state.ts) has a bounded part — the
 * SWA window (n_swa roped keys per layer) and the compressor rows of the
 * unfinished group(s) — and a part that grows with the context: one
 * compressed entry per `ratio` tokens per compressed layer, and on ratio-4
 * (CSA) layers one indexer key per entry. The growing part is held in the
 * sequence's pool pages, f32, in the 64-token block where its group ends:
 *
 *   page[compressed layer l, ascending]:
 *       entries   slots(r) × head_dim       slots(r) = 64/r (r ≤ 64) or 1 (r = 128: one entry per two blocks)
 *       idxKeys   slots(r) × indexer_dim    (ratio 4 only)
 *
 *   entry k of a ratio-r layer ends at position (k+1)·r − 1, so it lives in
 *   block ⌊((k+1)·r − 1)/64⌋, slot k mod slots(r).
 *
 * The pool reserves a sequence's pages before a forward (all-or-nothing, as
 * for every model), so admission and pool exhaustion count this state; the
 * bounded part stays with the graph per sequence (deepseek4-graph.ts) and
 * `kvtier model inspect` states both. A full page depends only on the tokens
 * through its block, so full pages are a unit's blocks (deepseek4-unit.ts);
 * the bounded part is its tail.
 */
import { TOKENS_PER_BLOCK, type KvLayout } from '../kv/kv-pool.ts';
import type { KvDType } from '../../native/index.ts';
import { EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import type { Deepseek4State } from './deepseek4-state.ts';

export interface Deepseek4PageLayout {
  /** f32 values of one page in use (the pool's page may be larger: its K|V arithmetic rounds up). */
  floats: number;
  /** Per trunk layer: float offset of its entries in a page, or −1 (ratio 0). */
  entryOffset: number[];
  /** Per trunk layer: float offset of its indexer keys, or −1 (not ratio 4). */
  keyOffset: number[];
  slots: number[];
}

function slotsOf(ratio: number): number {
  if (ratio <= TOKENS_PER_BLOCK && TOKENS_PER_BLOCK % ratio === 0) return TOKENS_PER_BLOCK / ratio;
  if (ratio % TOKENS_PER_BLOCK === 0) return 1;
  throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `deepseek4 compress ratio ${ratio} neither divides nor is a multiple of the ${TOKENS_PER_BLOCK}-token block`);
}

export function deepseek4PageLayout(cfg: Deepseek4Config): Deepseek4PageLayout {
  let floats = 0;
  const entryOffset: number[] = [];
  const keyOffset: number[] = [];
  const slots: number[] = [];
  for (let l = 0; l < cfg.nLayer; l++) {
    const r = cfg.ratios[l]!;
    if (r === 0) {
      entryOffset.push(-1);
      keyOffset.push(-1);
      slots.push(0);
      continue;
    }
    const n = slotsOf(r);
    slots.push(n);
    entryOffset.push(floats);
    floats += n * cfg.headDim;
    if (r === 4) {
      keyOffset.push(floats);
      floats += n * cfg.indexerDim;
    } else keyOffset.push(-1);
  }
  return { floats: Math.max(floats, 1), entryOffset, keyOffset, slots };
}

/**
 * The pool layout whose page holds one block's share (createKvPool's K|V
 * arithmetic: 1 layer, 1 head, head_dim = ⌈floats/128⌉, f32). It has no kind of its
 * own: the tier stores it as a unit's block (deepseek4-unit.ts), never as a whole state.
 */
export function deepseek4KvLayout(p: Deepseek4PageLayout): KvLayout {
  const headDim = Math.ceil(p.floats / (2 * TOKENS_PER_BLOCK));
  const dtype: KvDType = 'f32';
  return { layers: 1, kvHeads: 1, headDim, dtype, tokensPerBlock: TOKENS_PER_BLOCK, blockBytes: 2 * TOKENS_PER_BLOCK * headDim * 4 };
}

/**
 * Moves the entries and indexer keys the last token finished into their page
 * slots, leaving the state's arrays as views of the page (same values, so the
 * forward reads them unchanged). `page(b)` is the f32 view of block b's page.
 */
export function pageNewEntries(cfg: Deepseek4Config, p: Deepseek4PageLayout, st: Deepseek4State, poolBuffer: ArrayBufferLike, page: (block: number) => Float32Array): void {
  for (let l = 0; l < cfg.nLayer; l++) {
    if (p.entryOffset[l]! < 0) continue;
    const r = cfg.ratios[l]!;
    const ls = st.layers[l]!;
    for (const [list, offset, width] of [[ls.entries, p.entryOffset[l]!, cfg.headDim], [ls.idxKeys, p.keyOffset[l]!, cfg.indexerDim]] as const) {
      if (offset < 0) continue;
      // new entries are only ever appended: walk back over the ones not in a page yet
      for (let k = list.length - 1; k >= 0 && list[k]!.buffer !== poolBuffer; k--) {
        const block = Math.floor(((k + 1) * r - 1) / TOKENS_PER_BLOCK);
        const at = offset + (k % p.slots[l]!) * width;
        const view = page(block).subarray(at, at + width);
        view.set(list[k]!);
        list[k] = view;
      }
    }
  }
}
