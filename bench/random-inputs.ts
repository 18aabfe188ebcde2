/** Bench inputs: n floats in [-1, 1) from a 32-bit LCG, the same numbers for the same seed on every run. */
export function rand(n: number, seed: number): Float32Array {
  let s = seed >>> 0;
  const out = new Float32Array(n);
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out[i] = s / 2147483648 - 1;
  }
  return out;
}
