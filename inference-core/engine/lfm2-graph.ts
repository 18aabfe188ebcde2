/**
 * The LFM2 forward pass (`lfm2`), as llama.cpp's src/models/lfm2.cpp computes it:
 *
 *   x = embed(tokens)
 *   per layer l:
 *     h = rmsNorm(x)·attn_norm ("operator norm")
 *     attention layer: q,k,v = h·W{q,k,v}ᵀ; q,k = rmsNorm per head ·{q,k}_norm; rope NEOX;
 *                      a = causal GQA attention (1/√head_dim) over the paged KV; o = a·Woᵀ
 *     conv layer:      [b | c | xi] = h·in_projᵀ (three d-wide chunks); bx = b ⊙ xi
 *                      ext = [conv state (the last L−1 bx rows before this call) ; bx]
 *                      y_t = c_t ⊙ Σ_{i<L} ext[t+i] ⊙ w[·][i]   (ggml_ssm_conv: sequential f32 sum over i)
 *                      o = y·out_projᵀ; the state becomes the last L−1 rows of ext
 *     x += o;  x += SwiGLU FFN(rmsNorm(x)·ffn_norm)
 *   logits = rmsNorm(x[row])·token_embd_norm · Woutᵀ
 *
 * State: the attention layers' K/V live in the engine's paged pool (its page
 * holds the attention layers only: they are the block-concatenable part); the
 * convolution state is per sequence, held here by sequence id, f32
 * [L−1][dModel] per conv layer, and must sit exactly at the segment's pos0:
 * a sequence that got K/V blocks (or was truncated) without the matching
 * state is refused with KVT_ERR_ENGINE_SEQUENCE_STATE, never run on a wrong
 * state. Units carry it (unit-state.ts, tail section `conv`).
 *
 * The convolution runs on the host in f32 (Math.fround per operation): it is
 * O(n·d·L) next to the O(n·d²) projections around it.
 */
import type { Backend, KvPoolHandle, RopeOptions, TensorHandle, WeightHandle } from '../../native/index.ts';
import type { Lfm2Config } from '../lfm2-config.ts';
import { EngineError, forwardRows } from './engine-errors.ts';
import { graphDims, type GraphDims } from './llama-graph.ts';
import { allocScratch } from './graph-scratch.ts';
import { projectQkv, rowLogits, segmentRowOffsets, writeSegmentKv, type RowSegment } from './graph-rows.ts';

export interface Lfm2GraphConfig extends GraphDims {
  architecture: 'lfm2';
  rope: RopeOptions;
  convL: number;
  /** Per layer: its index among the attention layers (= its layer in the KV pool), or −1 for a conv layer. */
  poolLayer: number[];
}

export interface Lfm2LayerWeights {
  attnNorm: WeightHandle;
  ffnNorm: WeightHandle;
  wGate: WeightHandle;
  wUp: WeightHandle;
  wDown: WeightHandle;
  attn?: { wq: WeightHandle; wk: WeightHandle; wv: WeightHandle; qNorm: WeightHandle; kNorm: WeightHandle; wo: WeightHandle };
  /** conv: [dModel][L] f32 taps on the host. */
  conv?: { inProj: WeightHandle; outProj: WeightHandle; taps: Float32Array };
}

export interface Lfm2Weights {
  tokenEmbd: WeightHandle;
  layers: Lfm2LayerWeights[];
  outputNorm: WeightHandle;
  output: WeightHandle;
}

/** One sequence's convolution state at `position`: per conv layer (ascending), [L−1][dModel] f32. */
export interface ConvState {
  position: number;
  layers: number[];
  rows: Float32Array[];
}

export function lfm2GraphConfig(c: Lfm2Config): Lfm2GraphConfig {
  let next = 0;
  return {
    architecture: 'lfm2',
    ...graphDims(c),
    rope: { mode: 'neox', freqBase: c.ropeTheta, rotDims: c.headDim },
    convL: c.convL,
    poolLayer: c.kvHeadsPerLayer.map((h) => (h > 0 ? next++ : -1)),
  };
}

const f = Math.fround;

export class Lfm2Graph {
  private readonly s: Record<'x' | 'h' | 'q' | 'k' | 'v' | 'attn' | 'proj' | 'bcx' | 'y' | 'gate' | 'up' | 'normLast' | 'logits', TensorHandle>;
  private readonly states = new Map<number, ConvState>();
  private readonly convLayers: number[];

  constructor(
    private readonly b: Backend,
    readonly config: Lfm2GraphConfig,
    private readonly weights: Lfm2Weights,
    readonly maxRows: number,
    readonly maxLogitRows: number,
  ) {
    const c = config;
    const q = c.heads * c.headDim;
    const kv = c.kvHeads * c.headDim;
    const rows = { x: c.dim, h: c.dim, q, k: kv, v: kv, attn: q, proj: c.dim, bcx: 3 * c.dim, y: c.dim, gate: c.ffDim, up: c.ffDim };
    this.s = allocScratch(b, rows, maxRows, { normLast: c.dim, logits: c.vocabSize }, maxLogitRows);
    this.convLayers = c.poolLayer.flatMap((p, l) => (p < 0 ? [l] : []));
  }

  forward(pool: KvPoolHandle, tokens: Int32Array, positions: Int32Array, segments: RowSegment[], logitRows: Int32Array): Float32Array {
    const b = this.b;
    const c = this.config;
    const s = this.s;
    const n = forwardRows(this, tokens, positions, logitRows);
    const qDim = c.heads * c.headDim;
    const kvDim = c.kvHeads * c.headDim;
    const v = (t: TensorHandle, width: number) => b.view(t, 0, n * width);
    const x = v(s.x, c.dim);
    const h = v(s.h, c.dim);
    const segRow0 = segmentRowOffsets(segments, n);
    // every segment's conv state, checked before anything runs
    const states = segments.map((sg) => this.stateFor(sg));

    b.embed(x, this.weights.tokenEmbd, tokens);
    for (let l = 0; l < c.layers; l++) {
      const w = this.weights.layers[l];
      b.rmsNorm(h, x, w.attnNorm, n, c.dim, c.rmsEps);
      const proj = v(s.proj, c.dim);
      if (w.attn) {
        const q = v(s.q, qDim);
        const k = v(s.k, kvDim);
        const vv = v(s.v, kvDim);
        projectQkv(b, h, w.attn, n, q, k, vv);
        b.rmsNorm(q, q, w.attn.qNorm, n * c.heads, c.headDim, c.rmsEps);
        b.rmsNorm(k, k, w.attn.kNorm, n * c.kvHeads, c.headDim, c.rmsEps);
        b.rope(q, positions, n, c.heads, c.headDim, c.rope);
        b.rope(k, positions, n, c.kvHeads, c.headDim, c.rope);
        const pl = c.poolLayer[l];
        writeSegmentKv(b, pool, pl, segments, segRow0, kvDim, s.k, s.v);
        const attn = v(s.attn, qDim);
        b.attention(attn, q, pool, pl, c.heads, f(1 / f(Math.sqrt(c.headDim))), segments);
        b.matmul(proj, attn, w.attn.wo, n);
      } else {
        const conv = w.conv!;
        const bcx = v(s.bcx, 3 * c.dim);
        b.matmul(bcx, h, conv.inProj, n);
        const host = b.read(bcx);
        const y = new Float32Array(n * c.dim);
        segments.forEach((sg, i) => this.convolve(host, y, segRow0[i], sg.queries, states[i].rows[this.convLayers.indexOf(l)], conv.taps));
        const yt = v(s.y, c.dim);
        b.write(yt, y);
        b.matmul(proj, yt, conv.outProj, n);
      }
      b.add(x, x, proj, n * c.dim);
      b.rmsNorm(h, x, w.ffnNorm, n, c.dim, c.rmsEps);
      const gate = v(s.gate, c.ffDim);
      const up = v(s.up, c.ffDim);
      b.matmul(gate, h, w.wGate, n);
      b.matmul(up, h, w.wUp, n);
      b.swiglu(gate, gate, up, n * c.ffDim);
      b.matmul(proj, gate, w.wDown, n);
      b.add(x, x, proj, n * c.dim);
    }
    segments.forEach((sg, i) => {
      states[i].position = sg.pos0 + sg.queries;
      this.states.set(sg.seqId!, states[i]);
    });

    return rowLogits(b, s, this.weights, c, n, logitRows);
  }

  /** rows [row0, row0+n) of bcx [·][3d] → y; `state` [L−1][d] advanced in place. */
  private convolve(bcx: Float32Array, y: Float32Array, row0: number, n: number, state: Float32Array, taps: Float32Array): void {
    const d = this.config.dim;
    const L = this.config.convL;
    const keep = L - 1;
    const ext = new Float32Array((keep + n) * d);
    ext.set(state);
    for (let t = 0; t < n; t++) {
      const base = (row0 + t) * 3 * d;
      for (let ch = 0; ch < d; ch++) ext[(keep + t) * d + ch] = f(bcx[base + ch] * bcx[base + 2 * d + ch]);
    }
    for (let t = 0; t < n; t++) {
      const base = (row0 + t) * 3 * d;
      for (let ch = 0; ch < d; ch++) {
        let sum = 0;
        for (let i = 0; i < L; i++) sum = f(sum + f(ext[(t + i) * d + ch] * taps[ch * L + i]));
        y[(row0 + t) * d + ch] = f(bcx[base + d + ch] * sum);
      }
    }
    state.set(ext.subarray(n * d));
  }

  /** A working copy of the segment's state (committed after the forward), or a typed refusal. */
  private stateFor(sg: RowSegment): ConvState {
    if (sg.seqId === undefined) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'lfm2 segments must name their sequence (RowSegment.seqId)');
    const d = this.config.dim;
    const keep = this.config.convL - 1;
    if (sg.pos0 === 0) return { position: 0, layers: this.convLayers, rows: this.convLayers.map(() => new Float32Array(keep * d)) };
    const have = this.states.get(sg.seqId);
    if (!have || have.position !== sg.pos0) {
      throw new EngineError(
        'KVT_ERR_ENGINE_SEQUENCE_STATE',
        `lfm2 sequence ${sg.seqId} continues at ${sg.pos0} but its convolution state is ${have ? `at ${have.position}` : 'missing'}: K/V blocks are not an lfm2 model's whole state; import a unit or prefill from the start`,
      );
    }
    return { position: have.position, layers: have.layers, rows: have.rows.map((r) => r.slice()) };
  }

  recurrentState(seqId: number): ConvState | undefined {
    const st = this.states.get(seqId);
    return st && { position: st.position, layers: st.layers, rows: st.rows.map((r) => r.slice()) };
  }

  setRecurrentState(seqId: number, state: ConvState): void {
    const d = this.config.dim;
    const keep = this.config.convL - 1;
    if (state.layers.join() !== this.convLayers.join() || state.rows.some((r) => r.length !== keep * d)) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', `a convolution state of layers [${state.layers}] does not fit this lfm2 model (layers [${this.convLayers}], ${keep}×${d}); treat it as a miss`);
    }
    this.states.set(seqId, { position: state.position, layers: this.convLayers, rows: state.rows.map((r) => r.slice()) });
  }

  sequenceFreed(seqId: number): void {
    this.states.delete(seqId);
  }

  destroy(): void {
    for (const t of Object.values(this.s)) this.b.free(t);
    this.states.clear();
  }
}
