/**
 * The deepseek4 forward as the engine drives it (a ForwardGraph): each
 * segment's rows run through kvtier's deepseek4 forward (deepseek4-forward.ts,
 * one pass over the segment's tokens, mat-muls on the native kernels — the
 * arithmetic checked against llama.cpp) on that sequence's Deepseek4State.
 *
 * State: the compressed entries and indexer keys live in the sequence's pool
 * pages (deepseek4-pages.ts); the SWA window and the unfinished groups'
 * compressor rows are held here by sequence id. A segment must continue its
 * sequence exactly where the state is (pos0 == state.pos) or start it
 * (pos0 == 0): anything else (K/V blocks imported, a truncation further back
 * than the last forward's rollback marks) is refused with
 * KVT_ERR_ENGINE_SEQUENCE_STATE before any row runs, never computed on a wrong
 * state. A truncation within those marks (a rejected speculative draft) rolls
 * the state back exactly (deepseek4-marks.ts). With `mtp` the sequences also
 * feed the MTP block's window, and mtpDrafter() drafts from it (deepseek4-mtp.ts).
 * recurrentState() answers undefined (there are no convolution rows); its
 * presence tells the serving side the pages alone are not a state (no
 * whole-page blocks, no retained-prefix reuse). Units carry the rest
 * (deepseek4-unit.ts): unitState() gives a sequence's state to export,
 * setUnitState() installs an imported one.
 */
import type { Backend, KvPoolHandle } from '../../native/index.ts';
import { checkForwardRows, EngineError } from './engine-errors.ts';
import type { Deepseek4Config } from './deepseek4-config.ts';
import { Deepseek4Model } from './deepseek4-forward.ts';
import { pageNewEntries, type Deepseek4PageLayout } from './deepseek4-pages.ts';
import { Deepseek4State } from './deepseek4-state.ts';
import { rollbackTo } from './deepseek4-marks.ts';
import { MtpDrafter, mtpKeys } from './deepseek4-mtp.ts';
import type { RowSegment } from './graph-rows.ts';
import type { ConvState } from './lfm2-graph.ts';

export interface Deepseek4GraphConfig {
  architecture: 'deepseek4';
  vocabSize: number;
  cfg: Deepseek4Config;
  pages: Deepseek4PageLayout;
}

/** The CPU backend's in-place page view (the only backend deepseek4 runs on). */
export type PageViewBackend = Backend & { pageView(pool: KvPoolHandle, page: number): Uint8Array };

export class Deepseek4Graph {
  private readonly states = new Map<number, Deepseek4State>();

  constructor(
    private readonly backend: PageViewBackend,
    readonly config: Deepseek4GraphConfig,
    private readonly model: Deepseek4Model,
    readonly maxRows: number,
    readonly maxLogitRows: number,
    /** MTP drafting on: every sequence also feeds the MTP block's window (deepseek4-mtp.ts). */
    readonly mtp = false,
  ) {}

  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: RowSegment[], logitRows: Int32Array): Float32Array {
    const n = tokens.length;
    checkForwardRows(n, positions.length, this.maxRows, logitRows.length, this.maxLogitRows);
    const vocab = this.config.vocabSize;
    const slotOfRow = new Map<number, number>();
    logitRows.forEach((r, i) => slotOfRow.set(r, i));
    // every segment's state, checked before any row runs
    const states = segments.map((sg) => this.stateFor(sg));
    let r0 = 0;
    for (const sg of segments) {
      for (let j = 0; j < sg.queries; j++) {
        if (positions[r0 + j] !== sg.pos0 + j) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `deepseek4 row ${r0 + j} is at position ${positions[r0 + j]}, its segment says ${sg.pos0 + j}`);
      }
      r0 += sg.queries;
    }
    const out = new Float32Array(logitRows.length * vocab);
    let row = 0;
    segments.forEach((sg, i) => {
      const st = states[i]!;
      const page = (block: number): Float32Array => {
        const id = sg.blockTable[block];
        if (id === undefined) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `deepseek4 sequence ${sg.seqId} has no page for block ${block}`);
        const bytes = this.backend.pageView(pool, id);
        return new Float32Array(bytes.buffer, bytes.byteOffset, bytes.byteLength >> 2);
      };
      const poolBuffer = this.backend.pageView(pool, sg.blockTable[0]!).buffer;
      // the segment's rows in one pass (mat-muls over its tokens), then its new entries into their pages
      const want: number[] = [];
      for (let j = 0; j < sg.queries; j++) if (slotOfRow.has(row + j)) want.push(j);
      const logits = this.model.rows(st, Array.from(tokens.subarray(row, row + sg.queries)), want);
      pageNewEntries(this.config.cfg, this.config.pages, st, poolBuffer, page);
      want.forEach((j, k) => out.set(logits[k]!, slotOfRow.get(row + j)! * vocab));
      row += sg.queries;
      this.states.set(sg.seqId!, st);
    });
    return out;
  }

  sequenceFreed(seqId: number): void {
    this.states.delete(seqId);
  }

  /**
   * A truncation within the last forward's rows (a rejected draft) rolls the
   * state back exactly (deepseek4-marks.ts); any other leaves it, and the next
   * forward that does not start at 0 is refused.
   */
  sequenceTruncated(seqId: number, length: number): void {
    const st = this.states.get(seqId);
    if (st) rollbackTo(st, length);
  }

  /** A drafter from the sequence's state now (MTP on), or null when the sequence has fed nothing yet. */
  mtpDrafter(seqId: number): MtpDrafter | null {
    const st = this.states.get(seqId);
    return this.mtp && st ? new MtpDrafter(this.model, st) : null;
  }

  /** No convolution rows (see the file comment): always undefined. */
  recurrentState(_seqId: number): ConvState | undefined {
    return undefined;
  }

  /** The state a unit exports (deepseek4-unit.ts; its MTP window keyed), or undefined when the sequence has fed nothing. */
  unitState(seqId: number): Deepseek4State | undefined {
    const st = this.states.get(seqId);
    if (st?.mtp) mtpKeys(this.model, st);
    return st;
  }

  /** Installs an imported unit's state (its pages are already in the sequence); its MTP part must match this graph's. */
  setUnitState(seqId: number, st: Deepseek4State): void {
    if ((st.mtp !== null) !== this.mtp) throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', `a deepseek4 state ${st.mtp ? 'with' : 'without'} the MTP window for an engine with MTP drafting ${this.mtp ? 'on' : 'off'}; treat the unit as a miss`);
    this.states.set(seqId, st);
  }

  /** The state a sequence holds now (tests, state accounting). */
  stateOf(seqId: number): Deepseek4State | undefined {
    return this.states.get(seqId);
  }

  destroy(): void {
    this.states.clear();
    this.model.weights.native?.destroy();
  }

  private stateFor(sg: RowSegment): Deepseek4State {
    if (sg.seqId === undefined) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'deepseek4 segments must name their sequence (RowSegment.seqId)');
    if (sg.pos0 === 0) return this.model.newState(this.mtp);
    const have = this.states.get(sg.seqId);
    if (!have || have.pos !== sg.pos0) {
      throw new EngineError(
        'KVT_ERR_ENGINE_SEQUENCE_STATE',
        `deepseek4 sequence ${sg.seqId} continues at ${sg.pos0} but its state is ${have ? `at ${have.pos}` : 'missing'}: K/V pages are not a deepseek4 model's whole state (SWA window, compressor rows); prefill from the start`,
      );
    }
    return have;
  }
}
