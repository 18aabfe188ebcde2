/** N-gram lookup and the adaptive draft length on hand-made inputs. */
import { describe, expect, it } from 'vitest';
import { DraftLengthPolicy, NgramIndex, bestLength } from '../../inference-core/speculative/index.ts';

describe('NgramIndex', () => {
  it('proposes the continuation of the longest earlier suffix match, latest occurrence first', () => {
    const ix = new NgramIndex();
    ix.append([1, 2, 3, 4, 5, 9, 2, 3, 7, 1, 2, 3]);
    // suffix "1 2 3" (n = 3) occurred at 0..3, followed by 4 5 9 …
    expect(ix.lookup(3)).toEqual({ tokens: [4, 5, 9], matchN: 3 });
    ix.append([7]);
    // "2 3 7" seen at 6..9 → continues with 1 2 3 7, which reaches the suffix: a loop of period 4
    expect(ix.lookup(10)).toEqual({ tokens: [1, 2, 3, 7, 1, 2, 3, 7, 1, 2], matchN: 3 });
  });

  it('no match → empty draft; truncate forgets the dropped tail', () => {
    const ix = new NgramIndex();
    ix.append([1, 2, 3]);
    expect(ix.lookup(5)).toEqual({ tokens: [], matchN: 0 });
    ix.append([1, 8]);
    ix.truncate(4);
    expect(ix.tokens).toEqual([1, 2, 3, 1]);
    expect(ix.lookup(5)).toEqual({ tokens: [2, 3, 1, 2, 3], matchN: 1 });
  });
});

describe('draft length', () => {
  it('bestLength verifies while the expected tokens pay for the rows', () => {
    expect(bestLength(8, () => 0.9, 0.1)).toBe(8);
    expect(bestLength(8, () => 0.05, 0.1)).toBe(0);
    // α 0.5, row cost 0.3: E(1)/c(1) = 1.5/1.3 > 1, E(2)/c(2) = 1.75/1.6 < 1.5/1.3
    expect(bestLength(8, () => 0.5, 0.3)).toBe(1);
  });

  it('adaptive n-gram lengths fall to 0 after useless drafts and grow with accepted ones', () => {
    const useless = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1 });
    const first = useless.ngramLength(8, 2);
    expect(first).toBeGreaterThan(0);
    for (let i = 0; i < 10; i++) useless.record(useless.ngramLength(8, 2) || 1, 0, 2);
    expect(useless.ngramLength(8, 2)).toBe(0);
    const good = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1 });
    for (let i = 0; i < 10; i++) good.record(8, 8, 4);
    expect(good.ngramLength(8, 4)).toBe(8);
    const fixed = new DraftLengthPolicy({ mode: 'fixed' });
    expect(fixed.ngramLength(8, 1)).toBe(5);
  });

  it('measured row cost: the fastest recent time per row count (load spikes ignored); one slow timing does not end drafting', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive' });
    // A row costs 10 ms + 2 ms per extra row; every third timing is slowed 3× by other load.
    for (let i = 0; i < 30; i++) for (const rows of [1, 2, 4]) p.observeVerify(rows, (10 + 2 * (rows - 1)) * (i % 3 === 0 ? 3 : 1));
    // 32 windowed timings of slope 0.2 and the prior's 2 of 0.15.
    expect(p.rowCost).toBeCloseTo((32 * 0.2 + 2 * 0.15) / 34, 9);
    const q = new DraftLengthPolicy({ mode: 'adaptive' });
    for (let i = 0; i < 10; i++) q.observeVerify(1, 10);
    q.observeVerify(2, 40);
    expect(q.rowCost).toBeCloseTo((1 + 2 * 0.15) / 3, 9);
    for (let i = 0; i < 10; i++) q.record(8, 8, 4);
    expect(q.ngramLength(8, 4)).toBeGreaterThan(0);
  });
});
