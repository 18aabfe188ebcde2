/**
 * One sequence's KV state in the engine's paged pool: a block table (page id
 * of each 64-token block, in order) and a length in tokens.
 *
 *   tokens:  [ block 0 | block 1 | … | block k-1 | partial tail ]
 *   pages:     p0        p1            p(k-1)      p(k)   ← blockTable
 *
 * Invariant: blockTable covers ceil(length/64) pages; pages are allocated
 * up front for each call, all-or-nothing, so a failed call (pool exhausted,
 * context overflow, bad token) leaves the sequence and the pool unchanged.
 */
import type { KvPool } from '../kv/kv-pool.ts';
import { TOKENS_PER_BLOCK } from '../kv/kv-pool.ts';
import { EngineError } from './engine-errors.ts';

/** What a sequence needs from its engine (kept narrow so Sequence stays a plain state holder). */
/** Drafts with a model's own MTP block: feed the next token, get the logits of the one after it. */
export interface MtpStepper {
  step(token: number): Float32Array;
}

export interface SequenceHost {
  readonly pool: KvPool;
  readonly contextLength: number;
  readonly vocabSize: number;
  /**
   * Runs `tokens` of `seq` at positions [seq.length, …) and returns the last
   * row's logits, or every row's ([n][vocab]) when `allLogits`.
   */
  runPrefill(seq: Sequence, tokens: Int32Array, allLogits: boolean): Float32Array;
  /** Told once when a sequence is freed (so the host drops its reference). */
  sequenceFreed(seq: Sequence): void;
  /** Told after a truncation (graphs with state outside the pages roll it back). */
  sequenceTruncated?(seq: Sequence, length: number): void;
  /** Whether the model's MTP block drafts (deepseek4 loaded with mtp). */
  readonly hasMtp?: boolean;
  /** An MTP drafter from the sequence's state, or null (MTP off, nothing fed yet). */
  mtpDrafter?(seq: Sequence): MtpStepper | null;
}

export class Sequence {
  private table = new Int32Array(8);
  private blocks = 0;
  private tokens = 0;
  private freed = false;

  constructor(
    readonly host: SequenceHost,
    readonly id: number,
  ) {}

  /** Tokens whose K/V are in the pool. */
  get length(): number {
    return this.tokens;
  }

  /** Full 64-token blocks (exportable). */
  get fullBlocks(): number {
    return Math.floor(this.tokens / TOKENS_PER_BLOCK);
  }

  get isFreed(): boolean {
    return this.freed;
  }

  /** The pages of this sequence's blocks (a view; do not modify). */
  get blockTable(): Int32Array {
    return this.table.subarray(0, this.blocks);
  }

  /**
   * Appends cached blocks (each payload = one full page in the pool layout)
   * by copying them into fresh pages; no model computation. The sequence must
   * end on a block boundary (usually it is empty).
   */
  importBlocks(payloads: readonly Uint8Array[]): void {
    this.checkLive();
    if (this.tokens % TOKENS_PER_BLOCK !== 0) {
      throw new EngineError(
        'KVT_ERR_ENGINE_SEQUENCE_STATE',
        `blocks can only be imported at a block boundary; the sequence holds ${this.tokens} tokens — import before prefilling the tail`,
      );
    }
    if (payloads.length === 0) return;
    const pool = this.host.pool;
    const want = payloads.length * TOKENS_PER_BLOCK;
    this.checkContext(want);
    for (const p of payloads) {
      if (p.byteLength !== pool.layout.blockBytes) {
        throw new EngineError(
          'KVT_ERR_ENGINE_BAD_BLOCK',
          `a KV block payload must be ${pool.layout.blockBytes} bytes for this model and KV dtype, got ${p.byteLength}; treat the block as a miss`,
        );
      }
    }
    const pages = pool.alloc(payloads.length);
    for (let i = 0; i < pages.length; i++) pool.writePage(pages[i], payloads[i]);
    this.appendPages(pages);
    this.tokens += want;
  }

  /**
   * Restores a state of `length` tokens from whole pages (unit-state.ts
   * assembles them): page i holds tokens [64·i, 64·i + 64) of every layer, in
   * the pool layout; slots a layer never reads may hold anything. The
   * sequence must be empty; pages = ceil(length / 64).
   */
  importPages(pages: readonly Uint8Array[], length: number): void {
    this.checkLive();
    if (this.tokens !== 0) throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_STATE', `a unit is imported into an empty sequence; this one holds ${this.tokens} tokens`);
    if (!Number.isInteger(length) || length < 1 || pages.length !== Math.ceil(length / TOKENS_PER_BLOCK)) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `importPages: ${pages.length} pages cannot hold exactly ${length} tokens`);
    }
    this.checkContext(length);
    const pool = this.host.pool;
    for (const p of pages) {
      if (p.byteLength !== pool.layout.blockBytes) {
        throw new EngineError('KVT_ERR_ENGINE_BAD_BLOCK', `a page must be ${pool.layout.blockBytes} bytes for this model and KV dtype, got ${p.byteLength}; treat the unit as a miss`);
      }
    }
    const ids = pool.alloc(pages.length);
    for (let i = 0; i < ids.length; i++) pool.writePage(ids[i], pages[i]);
    this.appendPages(ids);
    this.tokens = length;
  }

  /** Copies of the pages holding tokens [0, length) (the last one partly filled); with `from`, pages before it are left out (holes). */
  exportPages(from = 0): Uint8Array[] {
    this.checkLive();
    const out: Uint8Array[] = [];
    for (let i = 0; i < this.blocks && i * TOKENS_PER_BLOCK < this.tokens; i++) if (i >= from) out[i] = this.host.pool.readPage(this.table[i]);
    return out;
  }

  /**
   * Prefills `tokens` after what the sequence holds; returns the logits of the
   * last one ([vocab]), or with `{ allLogits: true }` of every one ([n][vocab],
   * row-major; costs one LM-head row per token — for scoring, not for chat).
   */
  prefill(tokens: ArrayLike<number>, options: { allLogits?: boolean } = {}): Float32Array {
    this.checkLive();
    if (tokens.length === 0) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'prefill needs at least one token');
    }
    const ids = this.checkTokens(tokens);
    this.reserve(ids.length);
    return this.host.runPrefill(this, ids, options.allLogits === true);
  }

  /** Decodes one token (the previous step's choice); returns the next logits. */
  decode(token: number): Float32Array {
    return this.prefill([token]);
  }

  /**
   * Payloads of full blocks [from, to): byte copies of their pages, in the
   * layout page[layer][K|V][kvHead][64 tokens][headDim], or for an MLA model
   * (deepseek2) page[layer][64 tokens][kv_lora_rank + rope] (see kv/kv-pool.ts).
   */
  exportBlocks(from: number, to: number): Uint8Array[] {
    this.checkLive();
    const full = this.fullBlocks;
    if (!Number.isInteger(from) || !Number.isInteger(to) || from < 0 || to > full || from > to) {
      throw new EngineError(
        'KVT_ERR_ENGINE_BAD_ARGUMENT',
        `exportBlocks(${from}, ${to}): the sequence has ${full} full blocks; only full blocks [0, ${full}) can be exported`,
      );
    }
    const out: Uint8Array[] = [];
    for (let i = from; i < to; i++) out.push(this.host.pool.readPage(this.table[i]));
    return out;
  }

  /**
   * Keeps only the first `n` tokens (pages past them go back to the pool), so
   * a finished sequence can be reused by a prompt that shares its first `n`
   * tokens. The kept last page may hold stale K/V past `n`; nothing reads it
   * (attention stops at each query's position) and the next prefill
   * overwrites it.
   */
  truncate(n: number): void {
    this.checkLive();
    if (!Number.isInteger(n) || n < 0 || n > this.tokens) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `truncate(${n}): the sequence holds ${this.tokens} tokens; keep between 0 and ${this.tokens}`);
    }
    const keep = Math.ceil(n / TOKENS_PER_BLOCK);
    for (let i = keep; i < this.blocks; i++) this.host.pool.release(this.table[i]);
    this.blocks = keep;
    this.tokens = n;
    this.host.sequenceTruncated?.(this, n);
  }

  /** Returns the sequence's pages to the pool. Idempotent. */
  free(): void {
    if (this.freed) return;
    this.freed = true;
    for (let i = 0; i < this.blocks; i++) this.host.pool.release(this.table[i]);
    this.blocks = 0;
    this.tokens = 0;
    this.host.sequenceFreed(this);
  }

  // ---- engine-internal --------------------------------------------------------

  /** Ensures pages for `n` more tokens (all-or-nothing) without changing length. */
  reserve(n: number): void {
    this.checkContext(n);
    const needBlocks = Math.ceil((this.tokens + n) / TOKENS_PER_BLOCK);
    if (needBlocks > this.blocks) this.appendPages(this.host.pool.alloc(needBlocks - this.blocks));
  }

  /** Pages the sequence would need for `n` more tokens. */
  pagesNeededFor(n: number): number {
    return Math.max(0, Math.ceil((this.tokens + n) / TOKENS_PER_BLOCK) - this.blocks);
  }

  /** Records that `n` tokens were written into the reserved pages. */
  advance(n: number): void {
    this.tokens += n;
  }

  checkLive(): void {
    if (this.freed) {
      throw new EngineError('KVT_ERR_ENGINE_SEQUENCE_FREED', `sequence ${this.id} was freed; create a new one`);
    }
  }

  checkContext(n: number): void {
    if (this.tokens + n > this.host.contextLength) {
      throw new EngineError(
        'KVT_ERR_ENGINE_CONTEXT_OVERFLOW',
        `sequence would hold ${this.tokens + n} tokens but the model's context is ${this.host.contextLength}; ` +
          'shorten the prompt or lower max_tokens',
      );
    }
  }

  checkTokens(tokens: ArrayLike<number>): Int32Array {
    const vocab = this.host.vocabSize;
    const ids = new Int32Array(tokens.length);
    for (let i = 0; i < tokens.length; i++) {
      const t = tokens[i];
      if (!Number.isInteger(t) || t < 0 || t >= vocab) {
        throw new EngineError('KVT_ERR_ENGINE_BAD_TOKEN', `token ${t} at index ${i} is outside the vocab [0, ${vocab}); tokenize with this model's tokenizer`);
      }
      ids[i] = t;
    }
    return ids;
  }

  private appendPages(pages: Int32Array): void {
    if (this.blocks + pages.length > this.table.length) {
      let cap = this.table.length * 2;
      while (cap < this.blocks + pages.length) cap *= 2;
      const next = new Int32Array(cap);
      next.set(this.table.subarray(0, this.blocks));
      this.table = next;
    }
    this.table.set(pages, this.blocks);
    this.blocks += pages.length;
  }
}
