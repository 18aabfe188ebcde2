/**
 * The number automaton a number frame carries (number-state.ts) against the
 * re-parse it replaced (parseNumberPrefix on the whole prefix): on random
 * prefixes over the bytes a number can hold (and a few it cannot), for every
 * integer / exponent combination, each prefix is accepted by one exactly when
 * by the other, and completeness and the unbounded completion cost agree.
 */
import { describe, expect, it } from 'vitest';

import { isCompleteNumber, minNumberCompletion, parseNumberPrefix } from '../../../inference-core/grammar/number-prefix.ts';
import { NUM_START, numberA, numberB, numberComplete, numberPhase, numberStep, unboundedNumberCost } from '../../../inference-core/grammar/number-state.ts';

const ALPHABET = '0123456789000-+.eE.x ';

function rng(seed: number): () => number {
  let x = seed >>> 0;
  return () => {
    x = (Math.imul(x, 1664525) + 1013904223) >>> 0;
    return x / 4294967296;
  };
}

describe('number automaton == re-parse of the prefix', () => {
  for (const integer of [false, true]) {
    for (const allowExp of [true, false]) {
      it(`integer ${integer}, exponent ${allowExp}: 20,000 random prefixes`, () => {
        const rand = rng(integer ? 11 : allowExp ? 7 : 3);
        let accepted = 0;
        let complete = 0;
        const mismatches: string[] = [];
        const check = (ok: boolean, what: string, s: string): void => void (ok || mismatches.push(`${what} ${JSON.stringify(s)}`));
        for (let trial = 0; trial < 20000; trial++) {
          const len = 1 + Math.floor(rand() * 22);
          let s = '';
          let state = { p: NUM_START, a: 0, b: 0 };
          let alive = true;
          for (let i = 0; i < len; i++) {
            // Mostly digits, so long valid prefixes (and the caps) are reached.
            const ch = rand() < 0.6 ? String.fromCharCode(0x30 + Math.floor(rand() * 10)) : ALPHABET[Math.floor(rand() * ALPHABET.length)];
            s += ch;
            const parts = parseNumberPrefix(s, integer, allowExp);
            if (alive) {
              const packed = numberStep(state.p, state.a, state.b, ch.charCodeAt(0), integer, allowExp);
              alive = packed >= 0;
              if (alive) state = { p: numberPhase(packed), a: numberA(packed), b: numberB(packed) };
            }
            check(alive === (parts !== null), 'accepted', s);
            if (parts === null) break;
            accepted++;
            check(numberComplete(state.p) === isCompleteNumber(parts), 'complete', s);
            if (allowExp) check(unboundedNumberCost(state.p) === minNumberCompletion(parts, integer, null), 'cost', s);
            if (isCompleteNumber(parts)) complete++;
          }
        }
        expect(mismatches.slice(0, 5)).toEqual([]);
        // The draw reaches both outcomes often (a vacuous pass would not).
        expect(accepted).toBeGreaterThan(20000);
        expect(complete).toBeGreaterThan(10000);
      });
    }
  }

  it('the caps, leading zeros and dangling signs', () => {
    const run = (s: string, integer = false, allowExp = true): boolean => {
      let st = { p: NUM_START, a: 0, b: 0 };
      for (const ch of s) {
        const packed = numberStep(st.p, st.a, st.b, ch.charCodeAt(0), integer, allowExp);
        if (packed < 0) return false;
        st = { p: numberPhase(packed), a: numberA(packed), b: numberB(packed) };
      }
      return true;
    };
    for (const s of ['0', '-0', '0.5', '1e5', '1.5E-12', '123456789012345', '1.123456', '-', '1.', '1e', '1e+']) expect(run(s), s).toBe(true);
    for (const s of ['00', '01', '-.5', '.5', '1..2', '1.e5', '1234567890123456', '1.1234567', '1e123', '+1', '1e5.', '--1']) expect(run(s), s).toBe(false);
    expect(run('1.5', true)).toBe(false);
    expect(run('1e5', false, false)).toBe(false);
  });
});
