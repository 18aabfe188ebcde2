/**
 * Tokens for a block id: the same id gives the same tokens, different ids
 * give different tokens (with overwhelming probability: 512 draws from 2^31),
 * so the tier's chained prefix keys agree exactly where the traces' id
 * sequences agree. Deterministic across runs and processes.
 */

/** Fills `out[offset .. offset+blockTokens)` with block `id`'s tokens (a 32-bit mix of id and position, below `vocab`). */
export function fillBlockTokens(out: Uint32Array, offset: number, id: number, blockTokens: number, vocab = 0x7fffffff): void {
  for (let j = 0; j < blockTokens; j++) {
    let x = (Math.imul(id + 1, 0x9e3779b1) ^ Math.imul(j + 1, 0x85ebca77)) >>> 0;
    x = Math.imul(x ^ (x >>> 16), 0x7feb352d) >>> 0;
    x = Math.imul(x ^ (x >>> 15), 0x846ca68b) >>> 0;
    x = (x ^ (x >>> 16)) >>> 0;
    out[offset + j] = x % vocab;
  }
}

/** The prompt tokens of a request's cacheable blocks. */
export function tokensForBlocks(blocks: Uint32Array, blockTokens: number, vocab?: number): Uint32Array {
  const out = new Uint32Array(blocks.length * blockTokens);
  for (let i = 0; i < blocks.length; i++) fillBlockTokens(out, i * blockTokens, blocks[i], blockTokens, vocab);
  return out;
}

/** Blocks kept by a BlockTokenCache: 8,192 × 512 tokens × 4 bytes = 16 MiB. */
const CACHED_BLOCKS = 8192;

/**
 * tokensForBlocks with each block id's tokens kept once made: a trace's turns
 * resend the whole conversation, so most blocks of a request were synthesised
 * for an earlier turn (the replay spent 20–40 µs of main-thread time per
 * written block redoing them, bench/RESULTS.md "replay (#29), overhead").
 * Same output; cleared whole when full (ids recur within a conversation, so
 * a simple bound keeps the hit rate and needs no LRU bookkeeping).
 */
export class BlockTokenCache {
  /** Block id → its slot in `slab` (one allocation for every kept block: no 2 KiB buffer per new block). */
  private readonly slots = new Map<number, number>();
  private readonly slab: Uint32Array;

  constructor(
    private readonly blockTokens: number,
    private readonly vocab?: number,
    private readonly capacity = CACHED_BLOCKS,
  ) {
    this.slab = new Uint32Array(capacity * blockTokens);
  }

  tokensFor(blocks: Uint32Array): Uint32Array {
    const { blockTokens, slab, slots } = this;
    const out = new Uint32Array(blocks.length * blockTokens);
    for (let i = 0; i < blocks.length; i++) {
      let slot = slots.get(blocks[i]);
      if (slot === undefined) {
        if (slots.size >= this.capacity) slots.clear();
        slot = slots.size;
        fillBlockTokens(slab, slot * blockTokens, blocks[i], blockTokens, this.vocab);
        slots.set(blocks[i], slot);
      }
      out.set(slab.subarray(slot * blockTokens, (slot + 1) * blockTokens), i * blockTokens);
    }
    return out;
  }
}
