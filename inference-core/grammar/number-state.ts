/**
 * JSON number prefixes as a small automaton, stepped one byte at a time, so
 * a number frame carries its state (phase and digit counts) instead of its
 * text being re-parsed on every fed byte. It accepts exactly the prefixes
 * parseNumberPrefix (number-prefix.ts) accepts — same caps, same leading-zero,
 * dot and exponent rules — and its phase alone gives what the unbounded
 * completion rule needs (test/inference-core/grammar/number-state.test.ts
 * checks both against the re-parse on random prefixes).
 *
 * State: phase p, counter a (integer digits; 0 after the dot, where it no
 * longer matters), counter b (1 = the integer part is a lone '0'; fraction
 * or exponent digits in the later phases).
 */
import { MAX_EXP_DIGITS, MAX_FRAC_DIGITS, MAX_INT_DIGITS } from './number-prefix.ts';

export const NUM_START = 0, NUM_NEG = 1, NUM_INT = 2, NUM_DOT = 3, NUM_FRAC = 4, NUM_E = 5, NUM_E_SIGN = 6, NUM_EXP = 7;

/** Packs a state as p | a << 3 | b << 8 (a ≤ 15, b ≤ 6). */
export function packNumberState(p: number, a: number, b: number): number {
  return p | (a << 3) | (b << 8);
}
export const numberPhase = (packed: number): number => packed & 7;
export const numberA = (packed: number): number => (packed >>> 3) & 31;
export const numberB = (packed: number): number => packed >>> 8;

/** The state after byte `c`, packed; -1 when the prefix stops being a JSON number within the caps. */
export function numberStep(p: number, a: number, b: number, c: number, integer: boolean, allowExp: boolean): number {
  const digit = c >= 0x30 && c <= 0x39;
  switch (p) {
    case NUM_START:
      if (c === 0x2d) return packNumberState(NUM_NEG, 0, 0);
    // fall through: a digit starts the integer part either way
    case NUM_NEG:
      return digit ? packNumberState(NUM_INT, 1, c === 0x30 ? 1 : 0) : -1;
    case NUM_INT:
      if (digit) return b === 1 || a + 1 > MAX_INT_DIGITS ? -1 : packNumberState(NUM_INT, a + 1, 0);
      if (c === 0x2e) return integer ? -1 : packNumberState(NUM_DOT, 0, 0);
      if (c === 0x65 || c === 0x45) return integer || !allowExp ? -1 : packNumberState(NUM_E, 0, 0);
      return -1;
    case NUM_DOT:
      return digit ? packNumberState(NUM_FRAC, 0, 1) : -1;
    case NUM_FRAC:
      if (digit) return b + 1 > MAX_FRAC_DIGITS ? -1 : packNumberState(NUM_FRAC, 0, b + 1);
      if (c === 0x65 || c === 0x45) return allowExp ? packNumberState(NUM_E, 0, 0) : -1;
      return -1;
    case NUM_E:
      if (c === 0x2b || c === 0x2d) return packNumberState(NUM_E_SIGN, 0, 0);
    // fall through: a digit starts the exponent either way
    case NUM_E_SIGN:
      return digit ? packNumberState(NUM_EXP, 0, 1) : -1;
    case NUM_EXP:
      return digit && b + 1 <= MAX_EXP_DIGITS ? packNumberState(NUM_EXP, 0, b + 1) : -1;
  }
  return -1;
}

/** A complete number: no dangling '-', '.', 'e' or exponent sign. */
export function numberComplete(p: number): boolean {
  return p === NUM_INT || p === NUM_FRAC || p === NUM_EXP;
}

/** Fewest bytes that complete an unbounded number in phase p (minNumberCompletion with no bounds). */
export function unboundedNumberCost(p: number): number {
  return numberComplete(p) ? 0 : 1;
}
