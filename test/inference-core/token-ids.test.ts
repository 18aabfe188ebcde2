/** TokenIds (inference-core/tokenizer/token-ids.ts): a growable Uint32Array of token ids, checked against a plain array doing the same edits. */
import { describe, expect, it } from 'vitest';

import { TokenIds } from '../../inference-core/index.ts';

describe('TokenIds', () => {
  it('holds exactly what a plain array would after pushes, typed and untyped appends and truncations, across growth', () => {
    const ids = new TokenIds(2);
    const plain: number[] = [];
    let state = 7;
    const next = () => (state = (Math.imul(state, 1664525) + 1013904223) >>> 0);
    for (let round = 0; round < 200; round++) {
      const op = next() % 4;
      if (op === 0) {
        const id = next() % 200_000;
        ids.push(id);
        plain.push(id);
      } else if (op === 1 || op === 2) {
        const run = Array.from({ length: next() % 70 }, () => next() % 200_000);
        ids.append(op === 1 ? run : Uint32Array.from(run));
        plain.push(...run);
      } else {
        const keep = next() % (plain.length + 1);
        ids.truncate(keep);
        plain.length = keep;
      }
      expect(ids.length).toBe(plain.length);
    }
    expect(Array.from(ids.view)).toEqual(plain);
    expect(Array.from(ids.copy())).toEqual(plain);
  });

  it('starts from given ids (copied), and a copy does not change with later edits', () => {
    const source = Uint32Array.from([5, 6, 7]);
    const ids = new TokenIds(source);
    source[0] = 99;
    const kept = ids.copy();
    ids.truncate(1);
    ids.append([8, 9, 10, 11]);
    expect(Array.from(kept)).toEqual([5, 6, 7]);
    expect(Array.from(ids.view)).toEqual([5, 8, 9, 10, 11]);
  });

  it('appends a multi-megabyte run without a stack overflow (no argument spread)', () => {
    const ids = new TokenIds();
    const big = new Uint32Array(3_000_000).fill(3);
    ids.append(big);
    ids.append(Array.from(big.subarray(0, 500_000)));
    expect(ids.length).toBe(3_500_000);
  });

  it('refuses to truncate past its length', () => {
    const ids = new TokenIds([1, 2]);
    expect(() => ids.truncate(3)).toThrow(RangeError);
  });
});
