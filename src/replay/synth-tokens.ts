/**
 * Tokens for a block id: the same id gives the same tokens, different ids
 * give different tokens (with overwhelming probability: 512 draws from 2^31),
 * so the tier's chained prefix keys agree exactly where the traces' id
 * sequences agree. Deterministic across runs and processes.
 */

/**
 * Fills `out[offset .. offset+blockTokens)` with block `id`'s tokens: a 32-bit LCG (full period:
 * multiplier ≡ 1 mod 4, odd increment) started at a mix of the id, each state reduced below
 * `vocab`. Distinct ids start at distinct states (the mix is a bijection), and an LCG step is a
 * bijection too, so two ids' states differ at every position (below a vocabulary, each state
 * is mixed first: its low bits alone repeat soon). One multiply per token: the
 * murmur finalizer per token it replaces was most of a replay request's own time (#29).
 */
export function fillBlockTokens(out: Uint32Array, offset: number, id: number, blockTokens: number, vocab = 0x7fffffff): void {
  let x = Math.imul(id + 1, 0x9e3779b1);
  x = Math.imul(x ^ (x >>> 16), 0x7feb352d);
  x = Math.imul(x ^ (x >>> 15), 0x846ca68b);
  x ^= x >>> 16;
  if (vocab === 0x7fffffff) {
    for (let j = 0; j < blockTokens; j++) {
      x = (Math.imul(x, LCG_MUL) + LCG_ADD) | 0;
      // 2^31 ≡ 1 (mod 2^31 − 1): the high bit adds 1 to the low 31 bits (no float remainder: V8 calls fmod past 2^31).
      let r = (x & 0x7fffffff) + (x >>> 31);
      if (r >= 0x7fffffff) r -= 0x7fffffff;
      out[offset + j] = r;
    }
    return;
  }
  for (let j = 0; j < blockTokens; j++) {
    x = (Math.imul(x, LCG_MUL) + LCG_ADD) | 0;
    // An LCG's low bits have short periods (bit k: 2^(k+1)) and a vocabulary of 2^k reads only them: every bit is mixed down first.
    let t = Math.imul(x ^ (x >>> 16), 0x45d9f3b);
    t ^= t >>> 16;
    const u = t >>> 0;
    // u < 2^32 and vocab < 2^31: the float quotient is within u·2^-53 < 1/vocab of the true one, so its floor is exact.
    out[offset + j] = u - Math.floor(u / vocab) * vocab;
  }
}

const LCG_MUL = 0x2c9277b5;
const LCG_ADD = 0x3c6ef35f;

/** The prompt tokens of a request's cacheable blocks. */
export function tokensForBlocks(blocks: Uint32Array, blockTokens: number, vocab?: number): Uint32Array {
  const out = new Uint32Array(blocks.length * blockTokens);
  for (let i = 0; i < blocks.length; i++) fillBlockTokens(out, i * blockTokens, blocks[i], blockTokens, vocab);
  return out;
}

/**
 * tokensForBlocks into one buffer reused across calls: the replay asks for
 * every request's tokens, most of them blocks never seen before (the
 * conversation trace's first 3,000 requests hold 77,626 blocks of 52,317
 * distinct ids), so a per-id cache mostly missed and then thrashed (an
 * 8,192-block cache cleared itself every few hundred requests: ~10 µs of
 * main-thread time per written block, bench/RESULTS.md "replay (#29): the
 * segment store and a two-row index"), while making a block's tokens again
 * is ~1.5 µs. What cost was the cache's copies and a fresh array per request.
 * The returned view is valid until the next call (runReplay awaits each
 * request before the next; ReplayTarget.serve says a target must not keep it).
 */
export class BlockTokenBuffer {
  private buffer = new Uint32Array(0);

  constructor(
    private readonly blockTokens: number,
    private readonly vocab?: number,
  ) {}

  tokensFor(blocks: Uint32Array): Uint32Array {
    const { blockTokens } = this;
    const length = blocks.length * blockTokens;
    if (this.buffer.length < length) this.buffer = new Uint32Array(Math.max(length, this.buffer.length * 2));
    const out = this.buffer.subarray(0, length);
    for (let i = 0; i < blocks.length; i++) fillBlockTokens(out, i * blockTokens, blocks[i], blockTokens, this.vocab);
    return out;
  }
}
