/**
 * Seeded PRNG for synthetic weights: xoshiro128** for uniform u32, Box–Muller
 * for normals, filled straight into Float32Arrays (no per-value objects), so
 * ~100 M weights generate in about a second.
 */
export class Xoshiro128 {
  private s0: number;
  private s1: number;
  private s2: number;
  private s3: number;

  constructor(seed: number) {
    // splitmix32 expands the seed into four non-zero words.
    let x = seed >>> 0;
    const next = () => {
      x = (x + 0x9e3779b9) >>> 0;
      let z = x;
      z = Math.imul(z ^ (z >>> 16), 0x85ebca6b);
      z = Math.imul(z ^ (z >>> 13), 0xc2b2ae35);
      return (z ^ (z >>> 16)) >>> 0;
    };
    this.s0 = next();
    this.s1 = next();
    this.s2 = next();
    this.s3 = next() | 1;
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

  /** Uniform in (0, 1]. */
  nextUnit(): number {
    return (this.nextU32() + 1) / 4294967296;
  }

  /** Fills `out` with N(mean, std²). */
  fillNormal(out: Float32Array, mean: number, std: number): Float32Array {
    const n = out.length;
    const TWO_PI = 2 * Math.PI;
    let i = 0;
    for (; i + 1 < n; i += 2) {
      const r = Math.sqrt(-2 * Math.log(this.nextUnit())) * std;
      const th = TWO_PI * this.nextUnit();
      out[i] = mean + r * Math.cos(th);
      out[i + 1] = mean + r * Math.sin(th);
    }
    if (i < n) out[i] = mean + Math.sqrt(-2 * Math.log(this.nextUnit())) * std * Math.cos(TWO_PI * this.nextUnit());
    return out;
  }
}

function rotl(x: number, k: number): number {
  return (x << k) | (x >>> (32 - k));
}

/** FNV-1a of a string: a per-tensor seed that does not depend on generation order. */
export function seedFromString(s: string): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < s.length; i++) {
    h ^= s.charCodeAt(i);
    h = Math.imul(h, 0x01000193);
  }
  return h >>> 0;
}
