/**
 * Paged KV pool: a fixed number of pages, each holding the K and V of one
 * 64-token block for every layer, carved out of a byte budget.
 *
 * Page (= one kvtier block payload) layout, row-major, no padding:
 *
 *     page[layer][K|V][kvHead][64 tokens][headDim]      dtype f16 (default) or f32, little-endian
 *
 *   bytes = layers · 2 · kvHeads · 64 · headDim · bytes(dtype)
 *
 * Token t of a block lives at element ((((layer·2 + kv)·kvHeads + head)·64 + t)·headDim).
 * Exported blocks are pages copied out byte for byte and imported blocks are
 * copied in byte for byte, so a block file written on one node imports on
 * another with the same layout {layers, kvHeads, headDim, dtype, tokensPerBlock}.
 *
 * Bookkeeping: a stack of free page ids gives O(1) alloc and free; a refcount
 * per page lets several sequences share a prefix page. Allocation is
 * all-or-nothing: when the pool cannot satisfy a request it throws
 * KVT_ERR_ENGINE_POOL_EXHAUSTED before handing out (or touching) any page.
 */
import type { Backend, KvDType, KvPoolHandle } from '../../native/index.ts';
import { EngineError } from '../engine/engine-errors.ts';

export const TOKENS_PER_BLOCK = 64;

/** What a kvtier block file records about its KV payload. */
export interface KvLayout {
  layers: number;
  kvHeads: number;
  headDim: number;
  dtype: KvDType;
  tokensPerBlock: number;
  /** Bytes of one block payload. */
  blockBytes: number;
  /**
   * 'mla': a DeepSeek latent page, page[layer][64 tokens][headDim] with headDim =
   * kv_lora_rank + rope dims and kvHeads 1 (no separate V: it is a prefix of each row).
   * Absent: the K|V layout above.
   */
  kind?: 'mla';
}

/** Layout of an MLA latent page: one [c_kv | k_pe] row of `width` values per token and layer. */
export function mlaKvLayoutOf(layers: number, width: number, dtype: KvDType): KvLayout {
  const elem = dtype === 'f16' ? 2 : 4;
  return { layers, kvHeads: 1, headDim: width, dtype, tokensPerBlock: TOKENS_PER_BLOCK, blockBytes: layers * TOKENS_PER_BLOCK * width * elem, kind: 'mla' };
}

export function kvLayoutOf(layers: number, kvHeads: number, headDim: number, dtype: KvDType): KvLayout {
  const elem = dtype === 'f16' ? 2 : 4;
  return {
    layers,
    kvHeads,
    headDim,
    dtype,
    tokensPerBlock: TOKENS_PER_BLOCK,
    blockBytes: layers * 2 * kvHeads * TOKENS_PER_BLOCK * headDim * elem,
  };
}

/** Free-list + refcount bookkeeping of `pages` page ids; no memory of its own. */
export class PageAllocator {
  private readonly freeStack: Int32Array;
  private freeTop: number;
  private readonly refs: Int32Array;

  constructor(readonly pages: number) {
    if (!Number.isInteger(pages) || pages < 1) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `a KV pool needs at least one page, got ${pages}; raise poolBytes`);
    }
    this.freeStack = new Int32Array(pages);
    // Low ids on top so a fresh pool hands out 0, 1, 2, … (easier to read in a debugger).
    for (let i = 0; i < pages; i++) this.freeStack[i] = pages - 1 - i;
    this.freeTop = pages;
    this.refs = new Int32Array(pages);
  }

  get freePages(): number {
    return this.freeTop;
  }

  get usedPages(): number {
    return this.pages - this.freeTop;
  }

  /** `n` fresh pages (refcount 1 each), or KVT_ERR_ENGINE_POOL_EXHAUSTED with nothing taken. */
  alloc(n: number): Int32Array {
    if (n > this.freeTop) {
      throw new EngineError(
        'KVT_ERR_ENGINE_POOL_EXHAUSTED',
        `the KV pool has ${this.freeTop} free pages of ${this.pages} and ${n} are needed; ` +
          'free finished sequences, wait for running ones, or start the engine with a larger poolBytes',
      );
    }
    const out = new Int32Array(n);
    for (let i = 0; i < n; i++) {
      const page = this.freeStack[--this.freeTop];
      this.refs[page] = 1;
      out[i] = page;
    }
    return out;
  }

  /** One more owner of an allocated page (prefix sharing). */
  retain(page: number): void {
    this.check(page);
    this.refs[page]++;
  }

  /** Drops one owner; the page returns to the free list when none is left. */
  release(page: number): void {
    this.check(page);
    if (--this.refs[page] === 0) this.freeStack[this.freeTop++] = page;
  }

  refCount(page: number): number {
    return this.refs[page];
  }

  private check(page: number): void {
    if (!Number.isInteger(page) || page < 0 || page >= this.pages || this.refs[page] <= 0) {
      throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `page ${page} is not an allocated page of this pool (double free?)`);
    }
  }
}

/** The backend's page memory plus its allocator. */
export class KvPool {
  readonly layout: KvLayout;
  readonly handle: KvPoolHandle;
  readonly allocator: PageAllocator;

  constructor(
    private readonly backend: Backend,
    layout: KvLayout,
    poolBytes: number,
  ) {
    this.layout = layout;
    const pages = Math.floor(poolBytes / layout.blockBytes);
    if (pages < 1) {
      throw new EngineError(
        'KVT_ERR_ENGINE_BAD_ARGUMENT',
        `poolBytes ${poolBytes} is smaller than one KV page (${layout.blockBytes} bytes); raise poolBytes`,
      );
    }
    this.allocator = new PageAllocator(pages);
    if (layout.kind === 'mla' && !backend.createMlaKvPool) {
      throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `the ${backend.name} backend has no MLA latent KV pool; run this model on the cpu backend`);
    }
    this.handle = layout.kind === 'mla'
      ? backend.createMlaKvPool!({ layers: layout.layers, width: layout.headDim, pages, dtype: layout.dtype })
      : backend.createKvPool({
      layers: layout.layers,
      kvHeads: layout.kvHeads,
      headDim: layout.headDim,
      pages,
      dtype: layout.dtype,
    });
    if (this.handle.pageBytes !== layout.blockBytes) {
      throw new EngineError(
        'KVT_ERR_ENGINE_BAD_ARGUMENT',
        `backend page is ${this.handle.pageBytes} bytes but the layout says ${layout.blockBytes}; native and engine disagree on the KV layout`,
      );
    }
  }

  get pages(): number {
    return this.allocator.pages;
  }

  get freePages(): number {
    return this.allocator.freePages;
  }

  alloc(n: number): Int32Array {
    return this.allocator.alloc(n);
  }

  retain(page: number): void {
    this.allocator.retain(page);
  }

  release(page: number): void {
    this.allocator.release(page);
  }

  /** Copies one block payload into an allocated page. */
  writePage(page: number, payload: Uint8Array): void {
    if (payload.byteLength !== this.layout.blockBytes) {
      throw new EngineError(
        'KVT_ERR_ENGINE_BAD_BLOCK',
        `a KV block payload must be ${this.layout.blockBytes} bytes for this model and KV dtype, got ${payload.byteLength}; ` +
          'the block was written by another model or KV dtype — treat it as a miss',
      );
    }
    this.backend.copyIntoPage(this.handle, page, payload);
  }

  /** Copies one page out (a new array). */
  readPage(page: number): Uint8Array {
    return this.backend.copyFromPage(this.handle, page);
  }

  /** Releases the backend memory; the pool must not be used afterwards. */
  destroy(): void {
    this.backend.free(this.handle);
  }
}
