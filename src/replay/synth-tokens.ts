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
