/**
 * JSON numbers byte by byte: which prefixes are well formed, which are
 * complete, and — for bounded numbers — the fewest bytes that complete a
 * prefix into a value within the bounds (Infinity: none can).
 *
 * Bounded numbers are written without exponent, with at most MAX_INT_DIGITS
 * integer and MAX_FRAC_DIGITS fraction digits, so every completion shape
 * (j more integer digits, then optionally '.' and m fraction digits) reaches
 * one contiguous range of values scaled by 10^m; a shape is possible when
 * that range meets the bounds (exact BigInt arithmetic on the bounds'
 * shortest decimal form). Unbounded numbers cap their digits the same way
 * (so the value stays finite: ajv rejects Infinity) and allow an exponent.
 */
import type { NumBounds } from './grammar-nodes.ts';

export const MAX_INT_DIGITS = 15;
export const MAX_FRAC_DIGITS = 6;
export const MAX_EXP_DIGITS = 2;

interface Parts {
  neg: boolean;
  int: string;
  dot: boolean;
  frac: string;
  exp: boolean;
  expSign: boolean;
  expDigits: string;
}

/** Splits a well-formed prefix; null when `s` is not a prefix of a JSON number within the caps. */
export function parseNumberPrefix(s: string, integer: boolean, allowExp: boolean): Parts | null {
  let i = 0;
  const p: Parts = { neg: false, int: '', dot: false, frac: '', exp: false, expSign: false, expDigits: '' };
  if (s[i] === '-') {
    p.neg = true;
    i++;
  }
  while (i < s.length && s[i] >= '0' && s[i] <= '9') p.int += s[i++];
  if (p.int.length > MAX_INT_DIGITS || (p.int.length > 1 && p.int[0] === '0')) return null;
  if (i < s.length && s[i] === '.') {
    if (integer || p.int === '') return null;
    p.dot = true;
    i++;
    while (i < s.length && s[i] >= '0' && s[i] <= '9') p.frac += s[i++];
    if (p.frac.length > MAX_FRAC_DIGITS) return null;
  }
  if (i < s.length && (s[i] === 'e' || s[i] === 'E')) {
    if (!allowExp || integer || p.int === '' || (p.dot && p.frac === '')) return null;
    p.exp = true;
    i++;
    if (i < s.length && (s[i] === '+' || s[i] === '-')) {
      p.expSign = true;
      i++;
    }
    while (i < s.length && s[i] >= '0' && s[i] <= '9') p.expDigits += s[i++];
    if (p.expDigits.length > MAX_EXP_DIGITS) return null;
  }
  return i === s.length ? p : null;
}

/** A complete JSON number (no dangling '-', '.', 'e' or sign). */
export function isCompleteNumber(p: Parts): boolean {
  if (p.int === '') return false;
  if (p.dot && p.frac === '') return false;
  if (p.exp && p.expDigits === '') return false;
  return true;
}

/** Exact decimal form of a double's shortest representation: value = digits × 10^-scale. */
function decimalOf(x: number): { digits: bigint; scale: number } {
  const [mant, expPart] = x.toString().toLowerCase().split('e');
  const exp = expPart === undefined ? 0 : Number(expPart);
  const neg = mant.startsWith('-');
  const body = neg ? mant.slice(1) : mant;
  const [ip, fp = ''] = body.split('.');
  let digits = BigInt(ip + fp);
  let scale = fp.length - exp;
  if (scale < 0) {
    digits *= 10n ** BigInt(-scale);
    scale = 0;
  }
  return { digits: neg ? -digits : digits, scale };
}

function floorDiv(a: bigint, b: bigint): bigint {
  const q = a / b;
  return a % b !== 0n && (a < 0n) !== (b < 0n) ? q - 1n : q;
}

const scaledCache = new WeakMap<NumBounds, Array<{ lo: bigint | null; hi: bigint | null }>>();

/** Scaled integer bounds [lo, hi] (null = unbounded) of the values v/10^m allowed by `b` (memoized per bounds and m). */
function scaledBounds(b: NumBounds, m: number): { lo: bigint | null; hi: bigint | null } {
  let list = scaledCache.get(b);
  if (!list) {
    list = [];
    scaledCache.set(b, list);
  }
  return (list[m] ??= computeScaledBounds(b, m));
}

function computeScaledBounds(b: NumBounds, m: number): { lo: bigint | null; hi: bigint | null } {
  let lo: bigint | null = null;
  let hi: bigint | null = null;
  if (b.lo !== null) {
    const d = decimalOf(b.lo);
    const num = d.digits * 10n ** BigInt(m);
    const den = 10n ** BigInt(d.scale);
    // v ≥ lo·10^m  → v ≥ ceil(…);  v > lo·10^m → v ≥ floor(…) + 1
    lo = b.loExclusive ? floorDiv(num, den) + 1n : -floorDiv(-num, den);
  }
  if (b.hi !== null) {
    const d = decimalOf(b.hi);
    const num = d.digits * 10n ** BigInt(m);
    const den = 10n ** BigInt(d.scale);
    hi = b.hiExclusive ? -floorDiv(-num, den) - 1n : floorDiv(num, den);
  }
  return { lo, hi };
}

/** Integer-part values reachable by appending j digits to `int` (null: none). */
function intRange(int: string, j: number): [bigint, bigint] | null {
  if (int === '') {
    if (j === 0) return null;
    if (j === 1) return [0n, 9n];
    return [10n ** BigInt(j - 1), 10n ** BigInt(j) - 1n];
  }
  if (int === '0') return j === 0 ? [0n, 0n] : null;
  const base = BigInt(int) * 10n ** BigInt(j);
  return [base, base + 10n ** BigInt(j) - 1n];
}

function meets(lo: bigint, hi: bigint, neg: boolean, b: NumBounds, m: number): boolean {
  const [a, z] = neg ? [-hi, -lo] : [lo, hi];
  const s = scaledBounds(b, m);
  const from = s.lo === null ? a : a > s.lo ? a : s.lo;
  const to = s.hi === null ? z : z < s.hi ? z : s.hi;
  return from <= to;
}

/**
 * Fewest bytes that complete prefix `p` (bounded: within `bounds`, no
 * exponent) into a number; Infinity when none does.
 */
export function minNumberCompletion(p: Parts, integer: boolean, bounds: NumBounds | null): number {
  if (bounds === null) {
    if (p.exp) return p.expDigits === '' ? 1 : 0;
    if (p.dot) return p.frac === '' ? 1 : 0;
    return p.int === '' ? 1 : 0;
  }
  // An empty prefix may still take the sign.
  let best = p.int === '' && !p.neg ? 1 + minNumberCompletion({ ...p, neg: true }, integer, bounds) : Infinity;
  if (p.dot) {
    const fixed = BigInt((p.int || '0') + p.frac);
    for (let m = p.frac === '' ? 1 : 0; p.frac.length + m <= MAX_FRAC_DIGITS && m < best; m++) {
      const base = fixed * 10n ** BigInt(m);
      if (meets(base, base + 10n ** BigInt(m) - 1n, p.neg, bounds, p.frac.length + m)) best = m;
    }
    return best;
  }
  for (let j = 0; p.int.length + j <= MAX_INT_DIGITS && j < best; j++) {
    const r = intRange(p.int, j);
    if (r === null) continue;
    // Magnitudes only grow with more digits: past the largest allowed one, no longer shape can fit.
    const s0 = scaledBounds(bounds, 0);
    const maxMagnitude = p.neg ? (s0.lo === null ? null : -s0.lo) : s0.hi;
    if (maxMagnitude !== null && r[0] > maxMagnitude + 1n) break;
    if (meets(r[0], r[1], p.neg, bounds, 0)) {
      best = Math.min(best, j);
      break;
    }
    if (integer) continue;
    for (let m = 1; m <= MAX_FRAC_DIGITS && j + 1 + m < best; m++) {
      const scale = 10n ** BigInt(m);
      if (meets(r[0] * scale, r[1] * scale + scale - 1n, p.neg, bounds, m)) best = j + 1 + m;
    }
  }
  return best;
}

/** Whether the complete number text is within `bounds` the way a validator compares it (as a double). */
export function withinBounds(text: string, bounds: NumBounds | null): boolean {
  if (bounds === null) return true;
  const v = Number(text);
  if (bounds.lo !== null && (bounds.loExclusive ? !(v > bounds.lo) : !(v >= bounds.lo))) return false;
  if (bounds.hi !== null && (bounds.hiExclusive ? !(v < bounds.hi) : !(v <= bounds.hi))) return false;
  return true;
}
