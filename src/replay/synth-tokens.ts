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
  private readonly blocks = new Map<number, Uint32Array>();

  constructor(
    private readonly blockTokens: number,
    private readonly vocab?: number,
    private readonly capacity = CACHED_BLOCKS,
  ) {}

  tokensFor(blocks: Uint32Array): Uint32Array {
    const { blockTokens } = this;
    const out = new Uint32Array(blocks.length * blockTokens);
    for (let i = 0; i < blocks.length; i++) {
      let block = this.blocks.get(blocks[i]);
      if (block === undefined) {
        if (this.blocks.size >= this.capacity) this.blocks.clear();
        block = new Uint32Array(blockTokens);
        fillBlockTokens(block, 0, blocks[i], blockTokens, this.vocab);
        this.blocks.set(blocks[i], block);
      }
      out.set(block, i * blockTokens);
    }
    return out;
  }
}
