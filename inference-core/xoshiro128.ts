/**
 * xoshiro128** (Blackman & Vigna) in 32-bit integer arithmetic, seeded by
 * splitmix32: the one copy of the generator step that the sampler's Prng
 * (sampling/sampler.ts) and the synthetic weights (synthetic/prng.ts) share.
 * Every result is the same on every machine: no Math.random, no floats.
 * The two users seed differently (see their constructors), and their streams
 * are part of the contract (seeded replies, synthetic model fingerprints), so
 * neither may change how it seeds.
 */

/** splitmix32 expands a seed into four state words, so nearby seeds give unrelated streams. */
export function splitmix32Words(seed: number): [number, number, number, number] {
  let x = seed >>> 0;
  const next = (): number => {
    x = (x + 0x9e3779b9) >>> 0;
    let z = x;
    z = Math.imul(z ^ (z >>> 16), 0x85ebca6b) >>> 0;
    z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35) >>> 0;
    return (z ^ (z >>> 16)) >>> 0;
  };
  return [next(), next(), next(), next()];
}

/**
 * The generator over four 32-bit state words (not all zero). The words are
 * kept as signed int32 (what `^`, `<<` and `|` give), only the result is made
 * unsigned: a uint32 word of 2^31 or more is no int32, so V8 keeps such a
 * field as a heap double and every step allocates; that made the synthetic
 * weights' fillNormal about 5× slower (each `kvtier serve` / `kvtier worker`
 * with synthetic:small about 2 s longer to start; bench/RESULTS.md, issue #28
 * cluster before/after, traced). Same bits either way, so the streams do not change.
 */
export class Xoshiro128Core {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor([s0, s1, s2, s3]: [number, number, number, number]) {
    this.s0 = s0 | 0;
    this.s1 = s1 | 0;
    this.s2 = s2 | 0;
    this.s3 = s3 | 0;
  }

  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5), 7), 9) >>> 0;
    const t = this.s1 << 9;
    this.s2 ^= this.s0;
    this.s3 ^= this.s1;
    this.s1 ^= this.s2;
    this.s0 ^= this.s3;
    this.s2 ^= t;
    this.s3 = rotl(this.s3, 11);
    return result;
  }
}

/** Signed int32, like the state words. */
function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}
