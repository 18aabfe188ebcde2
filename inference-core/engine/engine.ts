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
 */
import type { Backend } from '../../native/index.ts';
import type { KvLayout } from '../kv/kv-pool.ts';
import { KvPool, TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import { EngineError } from './engine-errors.ts';
import { LlamaGraph, type GraphConfig, type ModelWeights, type RowSegment } from './llama-graph.ts';
import { Sequence, type SequenceHost } from './sequence.ts';

/** Rows of one prefill forward call: bounds activation memory for long prompts. */
export const DEFAULT_PREFILL_CHUNK = 512;
/** Most sequences one decodeBatch call may carry. */
export const DEFAULT_MAX_BATCH = 64;

export interface EngineParts<Tok, Cfg> {
  backend: Backend;
  graphConfig: GraphConfig;
  weights: ModelWeights;
  /** Extra handles the engine frees on destroy (bias tensors, …). */
  ownedTensors: Parameters<Backend['free']>[0][];
  kvLayout: KvLayout;
  poolBytes: number;
  contextLength: number;
  fingerprint: string;
  tokenizer: Tok;
  config: Cfg;
  prefillChunk?: number;
  maxBatch?: number;
  /** Runs after destroy() freed everything (e.g. closes the GGUF the weights view). */
  onDestroy?: () => void;
}

export class Engine<Tok = unknown, Cfg = unknown> implements SequenceHost {
  readonly backend: Backend;
  readonly pool: KvPool;
  readonly kvLayout: KvLayout;
  readonly fingerprint: string;
  readonly tokenizer: Tok;
  readonly config: Cfg;
  readonly graphConfig: GraphConfig;
  readonly contextLength: number;
  readonly vocabSize: number;
  readonly prefillChunk: number;
  readonly maxBatch: number;
  private readonly graph: LlamaGraph;
  private readonly weights: ModelWeights;
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
    this.graph = new LlamaGraph(this.backend, parts.graphConfig, parts.weights, Math.max(this.prefillChunk, this.maxBatch), this.maxBatch);
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
  }

  /** @internal SequenceHost: prefill in chunks; pages are already reserved. */
  runPrefill(seq: Sequence, tokens: Int32Array, allLogits: boolean): Float32Array {
    this.checkAlive();
    const vocab = this.vocabSize;
    // All-position logits are bounded by the LM-head scratch, so those chunks are smaller.
    const chunkRows = allLogits ? this.graph.maxLogitRows : this.prefillChunk;
    const all = allLogits ? new Float32Array(tokens.length * vocab) : null;
    let last: Float32Array | null = null;
    for (let off = 0; off < tokens.length; off += chunkRows) {
      const chunk = tokens.subarray(off, Math.min(tokens.length, off + chunkRows));
      const n = chunk.length;
      const pos0 = seq.length;
      const positions = new Int32Array(n);
      for (let i = 0; i < n; i++) positions[i] = pos0 + i;
      const isLast = off + n === tokens.length;
      let rows: Int32Array;
      if (all) {
        rows = new Int32Array(n);
        for (let i = 0; i < n; i++) rows[i] = i;
      } else rows = isLast ? Int32Array.of(n - 1) : new Int32Array(0);
      const segment: RowSegment = { blockTable: seq.blockTable, pos0, queries: n };
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
    this.checkAlive();
    const n = seqs.length;
    if (n !== tokens.length) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `decodeBatch got ${n} sequences and ${tokens.length} tokens; pass one token per sequence`);
    }
    if (n === 0) return [];
    if (new Set(seqs).size !== n) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'a sequence appears twice in one decode batch; decode it in two steps');
    }
    const out: Float32Array[] = [];
    for (let base = 0; base < n; base += this.maxBatch) {
      const part = seqs.slice(base, base + this.maxBatch);
      const ids = new Int32Array(part.length);
      let pagesNeeded = 0;
      for (let i = 0; i < part.length; i++) {
        const s = part[i];
        if (s.host !== this) {
          throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `sequence ${s.id} belongs to another engine`);
        }
        s.checkLive();
        s.checkContext(1);
        ids[i] = s.checkTokens([tokens[base + i]])[0];
        pagesNeeded += s.pagesNeededFor(1);
      }
      // All-or-nothing across the batch: check before any sequence takes a page.
      if (pagesNeeded > this.pool.freePages) this.pool.alloc(pagesNeeded); // throws the typed error
      for (const s of part) s.reserve(1);
      const positions = new Int32Array(part.length);
      const segments: RowSegment[] = part.map((s, i) => {
        positions[i] = s.length;
        return { blockTable: s.blockTable, pos0: s.length, queries: 1 };
      });
      const rows = new Int32Array(part.length);
      for (let i = 0; i < rows.length; i++) rows[i] = i;
      const logits = this.graph.forward(this.pool.handle, ids, positions, segments, rows);
      const vocab = this.vocabSize;
      for (let i = 0; i < part.length; i++) {
        part[i].advance(1);
        out.push(logits.slice(i * vocab, (i + 1) * vocab));
      }
    }
    return out;
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
    free(w.tokenEmbd);
    free(w.output);
    free(w.outputNorm);
    for (const l of w.layers) for (const h of [l.attnNorm, l.wq, l.wk, l.wv, l.wo, l.ffnNorm, l.wGate, l.wUp, l.wDown]) free(h);
    for (const h of this.owned) free(h);
    this.destroyed = true;
    this.onDestroy?.();
  }

  private checkAlive(): void {
    if (this.destroyed) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', 'the engine was destroyed; load it again');
  }
}
