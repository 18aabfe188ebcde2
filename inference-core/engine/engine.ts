/**
 * The engine: a loaded model (weights on a Backend), one paged KV pool and
 * the sequences that live in it.
 *
 * Threading: every call is synchronous and runs on the calling thread (the
 * native ops use their own thread pool). The engine holds no global state,
 * so a worker thread may own one engine; calls into one engine must not
 * interleave (they cannot, in one JS thread).
 *
 *   engine.createSequence() ─► seq.importBlocks(cached payloads)   memory copies into pages
 *                             ─► seq.prefill(uncached suffix)       → last-position logits
 *                             ─► seq.decode(token) …               → logits
 *                             ─► seq.exportBlocks(from, to)         → full-block payloads
 *                             ─► seq.free()
 *   engine.decodeBatch([s1…sn], [t1…tn])  one decode step for n sequences as one batch
 *   engine.step([{seq, tokens, logits}…])   decode rows and prefill chunks of many sequences in one forward
 */
import type { Backend } from '../../native/index.ts';
import type { KvLayout } from '../kv/kv-pool.ts';
import { KvPool, TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import { EngineError } from './engine-errors.ts';
import { LlamaGraph, type GraphConfig, type ModelWeights } from './llama-graph.ts';
import type { RowSegment } from './graph-rows.ts';
import type { DeepseekGraphConfig } from './deepseek-graph.ts';
import type { Gemma3GraphConfig } from './gemma3-graph.ts';
import type { GptOssGraphConfig } from './gptoss-graph.ts';
import type { ConvState, Lfm2GraphConfig } from './lfm2-graph.ts';
import type { Deepseek4GraphConfig } from './deepseek4-graph.ts';
import type { Deepseek4State } from './deepseek4-state.ts';
import type { EngineParts, ForwardGraph } from './engine-parts.ts';
import { Sequence, type MtpStepper, type SequenceHost } from './sequence.ts';

/** Rows of one prefill forward call: bounds activation memory for long prompts. */
export const DEFAULT_PREFILL_CHUNK = 512;
/** Most sequences one decodeBatch call may carry. */
export const DEFAULT_MAX_BATCH = 64;

/**
 * One sequence's share of an Engine.step: its new tokens, and whether the last
 * one's logits are wanted — or, with 'all', every token's ([n][vocab], for
 * verifying speculative drafts in the same forward as other sequences' rows).
 */
export interface StepItem {
  seq: Sequence;
  tokens: ArrayLike<number>;
  logits: boolean | 'all';
}

export class Engine<Tok = unknown, Cfg = unknown> implements SequenceHost {
  readonly backend: Backend;
  readonly pool: KvPool;
  readonly kvLayout: KvLayout;
  readonly fingerprint: string;
  readonly tokenizer: Tok;
  readonly config: Cfg;
  readonly graphConfig: GraphConfig | DeepseekGraphConfig | Gemma3GraphConfig | Lfm2GraphConfig | Deepseek4GraphConfig | GptOssGraphConfig;
  readonly contextLength: number;
  readonly vocabSize: number;
  readonly prefillChunk: number;
  readonly maxBatch: number;
  private readonly graph: ForwardGraph;
  private readonly weights: ModelWeights | undefined;
  private readonly owned: EngineParts<Tok, Cfg>['ownedTensors'];
  private readonly onDestroy: (() => void) | undefined;
  private readonly live = new Set<Sequence>();
  private nextId = 1;
  private destroyed = false;

  constructor(parts: EngineParts<Tok, Cfg>) {
    this.backend = parts.backend;
    this.graphConfig = parts.graphConfig;
    this.kvLayout = parts.kvLayout;
    this.fingerprint = parts.fingerprint;
    this.tokenizer = parts.tokenizer;
    this.config = parts.config;
    this.contextLength = parts.contextLength;
    this.vocabSize = parts.graphConfig.vocabSize;
    this.prefillChunk = parts.prefillChunk ?? DEFAULT_PREFILL_CHUNK;
    this.maxBatch = parts.maxBatch ?? DEFAULT_MAX_BATCH;
    this.weights = parts.weights;
    this.owned = parts.ownedTensors;
    this.onDestroy = parts.onDestroy;
    this.pool = new KvPool(this.backend, parts.kvLayout, parts.poolBytes);
    const maxRows = Math.max(this.prefillChunk, this.maxBatch);
    if (parts.graph) this.graph = parts.graph(maxRows, this.maxBatch);
    else if (parts.graphConfig.architecture === 'deepseek2' || parts.graphConfig.architecture === 'gemma3' || parts.graphConfig.architecture === 'lfm2' || parts.graphConfig.architecture === 'deepseek4' || parts.graphConfig.architecture === 'gpt-oss' || !parts.weights) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `a ${parts.graphConfig.architecture} engine needs its graph factory (EngineParts.graph); load it with loadEngine`);
    } else this.graph = new LlamaGraph(this.backend, parts.graphConfig, parts.weights, maxRows, this.maxBatch);
  }

  createSequence(): Sequence {
    this.checkAlive();
    const seq = new Sequence(this, this.nextId++);
    this.live.add(seq);
    return seq;
  }

  /** Live (not freed) sequences. */
  get sequences(): number {
    return this.live.size;
  }

  /** @internal SequenceHost */
  sequenceFreed(seq: Sequence): void {
    this.live.delete(seq);
    this.graph.sequenceFreed?.(seq.id);
  }

  /** @internal SequenceHost: a truncation reaches the graph's own per-sequence state. */
  sequenceTruncated(seq: Sequence, length: number): void {
    this.graph.sequenceTruncated?.(seq.id, length);
  }

  /** Whether this engine drafts with the model's own MTP block (loaded with mtp: true). */
  get hasMtp(): boolean {
    return this.graph.mtp === true;
  }

  /** An MTP drafter from `seq`'s state (null: MTP off, or the sequence has fed nothing). */
  mtpDrafter(seq: Sequence): MtpStepper | null {
    return this.graph.mtpDrafter?.(seq.id) ?? null;
  }

  /** Per-sequence state the graph holds outside the KV pool (lfm2: convolution rows), or undefined. */
  recurrentState(seq: Sequence): ConvState | undefined {
    return this.graph.recurrentState?.(seq.id);
  }

  /** Restores what recurrentState gave (unit import); typed KVT_ERR_ENGINE_BAD_BLOCK when it does not fit. */
  setRecurrentState(seq: Sequence, state: ConvState): void {
    if (!this.graph.setRecurrentState) throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', 'this model keeps no state outside its KV pages; treat the unit as a miss');
    this.graph.setRecurrentState(seq.id, state);
  }

  /** deepseek4: the state a unit of `seq` exports (deepseek4-unit.ts), or undefined. */
  unitState(seq: Sequence): Deepseek4State | undefined {
    return this.graph.unitState?.(seq.id);
  }

  /** deepseek4: installs an imported unit's state; typed KVT_ERR_ENGINE_BAD_BLOCK when it does not fit. */
  setUnitState(seq: Sequence, state: Deepseek4State): void {
    if (!this.graph.setUnitState) throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', 'this model has no deepseek4 unit state; treat the unit as a miss');
    this.graph.setUnitState(seq.id, state);
  }

  /** Whether the graph keeps per-sequence state outside the KV pool (then K/V blocks alone are not a state). */
  get hasRecurrentState(): boolean {
    return this.graph.recurrentState !== undefined;
  }

  /** @internal SequenceHost: prefill in chunks; pages are already reserved. */
  runPrefill(seq: Sequence, tokens: Int32Array, allLogits: boolean): Float32Array {
    this.checkAlive();
    const vocab = this.vocabSize;
    // All-position logits are bounded by the LM-head scratch, so those chunks are smaller.
    const chunkRows = allLogits ? this.graph.maxLogitRows : this.prefillChunk;
    // one chunk (a verification, a decode step): its forward's rows are the answer, no second [n][vocab] copy
    const all = allLogits && tokens.length > chunkRows ? new Float32Array(tokens.length * vocab) : null;
    let last: Float32Array | null = null;
    for (let off = 0; off < tokens.length; off += chunkRows) {
      const chunk = tokens.subarray(off, Math.min(tokens.length, off + chunkRows));
      const n = chunk.length;
      const pos0 = seq.length;
      const positions = new Int32Array(n);
      for (let i = 0; i < n; i++) positions[i] = pos0 + i;
      const isLast = off + n === tokens.length;
      let rows: Int32Array;
      if (allLogits) {
        rows = new Int32Array(n);
        for (let i = 0; i < n; i++) rows[i] = i;
      } else rows = isLast ? Int32Array.of(n - 1) : new Int32Array(0);
      const segment: RowSegment = { blockTable: seq.blockTable, pos0, queries: n, seqId: seq.id };
      const out = this.graph.forward(this.pool.handle, chunk, positions, [segment], rows);
      seq.advance(n);
      if (all) all.set(out, off * vocab);
      else if (isLast) last = out;
    }
    return all ?? last!;
  }

  /**
   * One decode step for several sequences as one batch: row i is `tokens[i]`
   * appended to `seqs[i]`. Returns each sequence's next logits. Each result
   * equals what `seqs[i].decode(tokens[i])` alone would give.
   */
  decodeBatch(seqs: readonly Sequence[], tokens: ArrayLike<number>): Float32Array[] {
    const n = seqs.length;
    if (n !== tokens.length) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `decodeBatch got ${n} sequences and ${tokens.length} tokens; pass one token per sequence`);
    }
    const out: Float32Array[] = [];
    for (let base = 0; base < n; base += this.maxBatch) {
      const part = seqs.slice(base, base + this.maxBatch).map((seq, i) => ({ seq, tokens: [tokens[base + i]], logits: true }));
      for (const logits of this.step(part)) out.push(logits!);
    }
    return out;
  }

  /**
   * One forward over new tokens of several sequences at once — decode rows and
   * prefill chunks mixed, as a chunked-prefill scheduler batches them:
   *
   *   rows:  [ s1: t ][ s2: t ][ s3: c0 c1 … c255 ][ s4: t ]     one GEMM per weight for all rows
   *
   * Returns, per item, the logits of its last token when `logits` is set, else
   * null. Each result (and each sequence's KV) equals what the item alone
   * would give (`seq.prefill(tokens)`): rows never mix across segments.
   * All-or-nothing: every check (rows, context, tokens, pool pages) runs
   * before any sequence changes.
   */
  step(items: readonly StepItem[]): (Float32Array | null)[] {
    this.checkAlive();
    if (items.length === 0) return [];
    if (new Set(items.map((item) => item.seq)).size !== items.length) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'a sequence appears twice in one step; give it one item with all its tokens');
    }
    let rows = 0;
    let logitRows = 0;
    let pagesNeeded = 0;
    const ids: Int32Array[] = [];
    for (const { seq, tokens, logits } of items) {
      if (seq.host !== this) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `sequence ${seq.id} belongs to another engine`);
      seq.checkLive();
      if (tokens.length === 0) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `step item for sequence ${seq.id} has no tokens`);
      seq.checkContext(tokens.length);
      ids.push(seq.checkTokens(tokens));
      rows += tokens.length;
      if (logits === 'all') logitRows += tokens.length;
      else if (logits) logitRows++;
      pagesNeeded += seq.pagesNeededFor(tokens.length);
    }
    if (rows > this.graph.maxRows || logitRows > this.graph.maxLogitRows) {
      throw new EngineError(
        'KVT_ERR_ENGINE_BAD_ARGUMENT',
        `a step carries at most ${this.graph.maxRows} tokens and ${this.graph.maxLogitRows} logit rows, got ${rows} and ${logitRows}; split it`,
      );
    }
    if (pagesNeeded > this.pool.freePages) this.pool.alloc(pagesNeeded); // throws the typed error
    const allIds = new Int32Array(rows);
    const positions = new Int32Array(rows);
    const wanted = new Int32Array(logitRows);
    const segments: RowSegment[] = [];
    let row = 0;
    let w = 0;
    items.forEach(({ seq, logits }, i) => {
      const n = ids[i].length;
      seq.reserve(n);
      allIds.set(ids[i], row);
      for (let j = 0; j < n; j++) positions[row + j] = seq.length + j;
      segments.push({ blockTable: seq.blockTable, pos0: seq.length, queries: n, seqId: seq.id });
      if (logits === 'all') for (let j = 0; j < n; j++) wanted[w++] = row + j;
      else if (logits) wanted[w++] = row + n - 1;
      row += n;
    });
    const out = this.graph.forward(this.pool.handle, allIds, positions, segments, wanted);
    const vocab = this.vocabSize;
    w = 0;
    return items.map(({ seq, logits }, i) => {
      seq.advance(ids[i].length);
      if (!logits) return null;
      const count = logits === 'all' ? ids[i].length : 1;
      const at = w;
      w += count;
      return out.slice(at * vocab, (at + count) * vocab);
    });
  }

  /** Bytes of KV one token takes in this engine's pool. */
  get kvBytesPerToken(): number {
    return this.kvLayout.blockBytes / TOKENS_PER_BLOCK;
  }

  /** Frees every sequence, the pool, the scratch and the weights. */
  destroy(): void {
    if (this.destroyed) return;
    for (const s of [...this.live]) s.free();
    this.live.clear();
    this.graph.destroy();
    this.pool.destroy();
    const w = this.weights;
    const seen = new Set<unknown>();
    const free = (h: Parameters<Backend['free']>[0]) => {
      if (seen.has(h)) return;
      seen.add(h);
      this.backend.free(h);
    };
    if (w) {
      for (const h of [w.tokenEmbd, w.output, w.outputNorm]) free(h);
      for (const l of w.layers) for (const h of [l.attnNorm, l.wq, l.wk, l.wv, l.wo, l.ffnNorm, l.wGate, l.wUp, l.wDown]) free(h);
    }
    for (const h of this.owned) free(h);
    this.destroyed = true;
    this.onDestroy?.();
  }

  private checkAlive(): void {
    if (this.destroyed) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', 'the engine was destroyed; load it again');
  }
}
