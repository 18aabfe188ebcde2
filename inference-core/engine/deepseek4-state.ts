/**
 * One sequence's deepseek4 attention state, per trunk layer — everything a
 * later token reads, and nothing more:
 *
 *   raw      the last n_swa roped KV vectors (the SWA window; V is K)
 *   comp*    compressor rows (kv and gate score, width coff·head_dim) of the
 *            positions an unfinished compressed block still needs: the current
 *            group, and for CSA (ratio 4, overlapping windows) the previous one
 *   entries  compressed KV entries, one per finished block of `ratio` tokens
 *   idx*     the indexer's own compressor rows and compressed keys (ratio 4)
 *
 * Invariants: after `pos` tokens, raw holds positions max(0, pos−n_swa)..pos−1;
 * entries.length == floor(pos / ratio); rows are kept for positions ≥
 * (floor(pos/ratio) − 1)·ratio (CSA) or ≥ floor(pos/ratio)·ratio (HCA).
 * `clone()` is a deep copy. Speculative rollback goes through the marks the
 * last forward left (deepseek4-marks.ts). With MTP drafting on, `mtp` is the
 * MTP block's own SWA window, keyed lazily (deepseek4-mtp-window.ts), and
 * `hLast` the trunk's hidden state (hc·n_embd, before the head) after the last
 * fed token: what the MTP block pairs with the next token.
 */
import type { StateMark } from './deepseek4-marks.ts';
import { MtpWindow } from './deepseek4-mtp-window.ts';

export interface Deepseek4LayerState {
  raw: Float32Array[];
  rawPos: number[];
  compKv: Map<number, Float32Array>;
  compScore: Map<number, Float32Array>;
  entries: Float32Array[];
  idxKv: Map<number, Float32Array>;
  idxScore: Map<number, Float32Array>;
  idxKeys: Float32Array[];
}

export function emptyLayerState(): Deepseek4LayerState {
  return { raw: [], rawPos: [], compKv: new Map(), compScore: new Map(), entries: [], idxKv: new Map(), idxScore: new Map(), idxKeys: [] };
}

export class Deepseek4State {
  pos = 0;
  readonly layers: Deepseek4LayerState[];
  mtp: MtpWindow | null = null;
  hLast: Float32Array | null = null;
  /** State after position k, for k among the last forward's rows (deepseek4-marks.ts). */
  readonly marks = new Map<number, StateMark>();

  /** `mtpSwa` > 0: MTP drafting on, the MTP block's window of that many positions. */
  constructor(nLayer: number, mtpSwa = 0) {
    this.layers = Array.from({ length: nLayer }, emptyLayerState);
    if (mtpSwa > 0) this.mtp = new MtpWindow(mtpSwa);
  }

  clone(): Deepseek4State {
    const c = new Deepseek4State(0);
    c.pos = this.pos;
    const copyMap = (m: Map<number, Float32Array>) => new Map([...m].map(([k, v]) => [k, v.slice()]));
    const copy = (l: Deepseek4LayerState): Deepseek4LayerState => ({
      raw: l.raw.map((v) => v.slice()), rawPos: [...l.rawPos], compKv: copyMap(l.compKv), compScore: copyMap(l.compScore),
      entries: l.entries.map((v) => v.slice()), idxKv: copyMap(l.idxKv), idxScore: copyMap(l.idxScore), idxKeys: l.idxKeys.map((v) => v.slice()),
    });
    for (const l of this.layers) c.layers.push(copy(l));
    c.mtp = this.mtp?.clone() ?? null;
    c.hLast = this.hLast?.slice() ?? null;
    return c;
  }

  /** Bytes of f32 state held now (SWA window, compressor rows, compressed entries, indexer keys). */
  bytes(): number {
    let n = 0;
    const rows = (m: Map<number, Float32Array>) => {
      for (const v of m.values()) n += v.byteLength;
    };
    for (const l of this.layers) {
      for (const v of l.raw) n += v.byteLength;
      for (const v of l.entries) n += v.byteLength;
      for (const v of l.idxKeys) n += v.byteLength;
      rows(l.compKv);
      rows(l.compScore);
      rows(l.idxKv);
      rows(l.idxScore);
    }
    return n;
  }
}

/** The shape numbers the state's size depends on (a Deepseek4Config has them all). */
export interface Deepseek4StateShape {
  nLayer: number;
  headDim: number;
  indexerDim: number;
  nSwa: number;
  ratios: readonly number[];
}

/**
 * Bytes of f32 state a sequence of `ctx` tokens holds (what Deepseek4State.bytes()
 * reports, exactly): per trunk layer the SWA window (min(ctx, n_swa) keys),
 * floor(ctx/ratio) compressed entries (+ as many indexer keys at ratio 4) and
 * the compressor rows of the unfinished block(s).
 */
export function deepseek4StateBytes(s: Deepseek4StateShape, ctx: number): number {
  let n = 0;
  for (let l = 0; l < s.nLayer; l++) {
    const r = s.ratios[l]!;
    n += Math.min(ctx, s.nSwa) * s.headDim * 4;
    if (r === 0) continue;
    const blocks = Math.floor(ctx / r);
    // CSA keeps the last finished block's rows too (the next block's overlap half)
    const rows = r === 4 ? ctx - Math.max(0, (blocks - 1) * r) : ctx - blocks * r;
    const coff = r === 4 ? 2 : 1;
    n += blocks * s.headDim * 4 + rows * 2 * coff * s.headDim * 4;
    if (r === 4) n += blocks * s.indexerDim * 4 + rows * 2 * 2 * s.indexerDim * 4;
  }
  return n;
}

/** Growth rates of deepseek4StateBytes: per token inside the SWA window, per context position for ever. */
export function deepseek4StateRates(s: Deepseek4StateShape): { perTokenInWindow: number; perPosition: number } {
  let perPosition = 0;
  for (let l = 0; l < s.nLayer; l++) {
    const r = s.ratios[l]!;
    if (r !== 0) perPosition += (s.headDim * 4) / r + (r === 4 ? (s.indexerDim * 4) / 4 : 0);
  }
  return { perTokenInWindow: s.nLayer * s.headDim * 4, perPosition };
}
