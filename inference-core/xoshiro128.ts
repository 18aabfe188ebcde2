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

/** The generator over four 32-bit state words (not all zero). */
export class Xoshiro128Core {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor([s0, s1, s2, s3]: [number, number, number, number]) {
    this.s0 = s0 >>> 0;
    this.s1 = s1 >>> 0;
    this.s2 = s2 >>> 0;
    this.s3 = s3 >>> 0;
  }

  nextU32(): number {
    const result = Math.imul(rotl(Math.imul(this.s1, 5) >>> 0, 7), 9) >>> 0;
    const t = (this.s1 << 9) >>> 0;
    this.s2 = (this.s2 ^ this.s0) >>> 0;
    this.s3 = (this.s3 ^ this.s1) >>> 0;
    this.s1 = (this.s1 ^ this.s2) >>> 0;
    this.s0 = (this.s0 ^ this.s3) >>> 0;
    this.s2 = (this.s2 ^ t) >>> 0;
    this.s3 = rotl(this.s3, 11);
    return result;
  }
}

function rotl(x: number, k: number): number {
  return ((x << k) | (x >>> (32 - k))) >>> 0;
}
