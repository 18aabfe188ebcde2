/** f16 ↔ f32 in plain TypeScript (nearest even), for building f16 pages in the codec tests. */
const f32 = new Float32Array(1);
const u32 = new Uint32Array(f32.buffer);

export function f32ToF16(v: number): number {
  f32[0] = v;
  const x = u32[0];
  const sign = (x >>> 16) & 0x8000;
  const abs = x & 0x7fffffff;
  if (abs >= 0x7f800000) return sign | 0x7c00 | (abs > 0x7f800000 ? 0x200 : 0);
  if (abs >= 0x477ff000) return sign | 0x7c00;
  if (abs < 0x38800000) {
    if (abs < 0x33000000) return sign;
    const e = abs >>> 23;
    const m = (abs & 0x7fffff) | 0x800000;
    const drop = 126 - e;
    let r = m >>> drop;
    const rem = m & ((1 << drop) - 1);
    const half = 1 << (drop - 1);
    if (rem > half || (rem === half && r & 1)) r++;
    return sign | r;
  }
  const r = abs - 0x38000000;
  let mant = r >>> 13;
  const rem = r & 0x1fff;
  if (rem > 0x1000 || (rem === 0x1000 && mant & 1)) mant++;
  return sign | mant;
}

export function f16ToF32(h: number): number {
  const sign = h & 0x8000 ? -1 : 1;
  const e = (h >> 10) & 0x1f;
  const m = h & 0x3ff;
  if (e === 0) return sign * m * 2 ** -24;
  if (e === 31) return m ? NaN : sign * Infinity;
  return sign * (1 + m / 1024) * 2 ** (e - 15);
}
