/**
 * The rejection rule with grammar-masked rows keeps the masked target law
 * (what plain constrained sampling draws from): on a vocabulary of 8 with a
 * mask, the first emitted token of a verification (n-gram point mass, or a
 * draft-model q itself masked) is chi-square tested against the masked law,
 * and the masked law is Sampler's masked sampling law. Tokens outside the
 * mask never appear; the unmasked rule emits them and is caught.
 */
import { describe, expect, it } from 'vitest';
import { Prng, Sampler } from '../../inference-core/sampling/sampler.ts';
import { acceptGreedy, acceptSampled, targetDistribution, type TokenDistribution } from '../../inference-core/speculative/index.ts';

const VOCAB = 8;
const N = 40_000;
// Upper 0.999 quantiles of chi-square by degrees of freedom.
const CHI2_999: Record<number, number> = { 2: 13.82, 3: 16.27, 4: 18.47 };

const maskOf = (ids: number[]): Uint32Array => {
  const bits = new Uint32Array(1);
  for (const id of ids) bits[0] |= 1 << id;
  return bits;
};
const full = (d: TokenDistribution): number[] => {
  const p = new Array(VOCAB).fill(0);
  d.ids.forEach((id, i) => (p[id] = d.probs[i]));
  return p;
};

function chiSquare(counts: number[], probs: number[], n: number): number {
  let x = 0;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] === 0) {
      if (counts[i] > 0) return Infinity;
      continue;
    }
    x += (counts[i] - probs[i] * n) ** 2 / (probs[i] * n);
  }
  return x;
}

// Row 0 and row 1 logits; the unmasked argmax of row 0 (id 1) is outside the mask.
const L0 = Float32Array.from([0.4, 2.5, 0.9, -0.2, 1.1, 0.3, 1.8, -1]);
const L1 = Float32Array.from([0.1, 0.7, 1.4, 0.2, -0.5, 0.9, 0.3, 0.6]);
const rows = new Float32Array(2 * VOCAB);
rows.set(L0, 0);
rows.set(L1, VOCAB);
const MASK0 = maskOf([0, 2, 4, 6, 7]);
const MASK1 = maskOf([2, 3, 5]);
const masks = (row: number) => (row === 0 ? MASK0 : MASK1);

describe('masked verification rows', () => {
  it("the masked law equals Sampler's masked sampling law (temperature 0.9, top-k 4, top-p 0.95)", () => {
    const o = { temperature: 0.9, topK: 4, topP: 0.95 };
    const want = full(targetDistribution(L0, o, [], MASK0));
    expect(want[1]).toBe(0);
    const sampler = new Sampler({ ...o, seed: 4 });
    const counts = new Array(VOCAB).fill(0);
    for (let i = 0; i < N; i++) counts[sampler.sample(L0, MASK0)]++;
    expect(chiSquare(counts, want, N)).toBeLessThan(CHI2_999[3]);
  });

  it('greedy: the masked argmax decides acceptance', () => {
    // Unmasked argmax of row 0 is 1; masked it is 6.
    expect(acceptGreedy(rows, VOCAB, [6], { temperature: 0 }, [], masks)).toEqual({ accepted: 1, next: 2 });
    expect(acceptGreedy(rows, VOCAB, [4], { temperature: 0 }, [], masks)).toEqual({ accepted: 0, next: 6 });
  });

  for (const o of [{ temperature: 1 }, { temperature: 0.7, topK: 3 }]) {
    it(`n-gram point mass on an allowed token (${JSON.stringify(o)}): first emitted token ~ masked law`, () => {
      const want = full(targetDistribution(L0, o, [], MASK0));
      const free = want.filter((p) => p > 0).length - 1;
      for (const drafted of [6, 0]) {
        const prng = new Prng(20 + drafted);
        const counts = new Array(VOCAB).fill(0);
        for (let i = 0; i < N; i++) {
          const r = acceptSampled(rows, VOCAB, [drafted], [null], o, [], prng, masks);
          counts[r.accepted === 1 ? drafted : r.next]++;
        }
        expect(chiSquare(counts, want, N)).toBeLessThan(CHI2_999[free]);
      }
    });
  }

  it('draft-model q masked too: first two emitted tokens follow the masked chain', () => {
    const o = { temperature: 1 };
    const p0 = full(targetDistribution(L0, o, [], MASK0));
    const p1 = full(targetDistribution(L1, o, [], MASK1));
    // A draft law far from p on the allowed ids.
    const q0: TokenDistribution = { ids: Int32Array.from([0, 2, 4, 6, 7]), probs: Float64Array.from([0.4, 0.05, 0.3, 0.05, 0.2]) };
    const q1: TokenDistribution = { ids: Int32Array.from([2, 3, 5]), probs: Float64Array.from([0.1, 0.8, 0.1]) };
    const draw = (q: TokenDistribution, u: number) => {
      let acc = 0;
      for (let i = 0; i < q.ids.length; i++) if (u < (acc += q.probs[i])) return q.ids[i];
      return q.ids[q.ids.length - 1];
    };
    // Three rows: the bonus row after two accepted drafts (any allowed token; not counted).
    const rows3 = new Float32Array(3 * VOCAB);
    rows3.set(rows, 0);
    rows3.set(L0, 2 * VOCAB);
    const masks3 = (row: number) => (row === 2 ? MASK0 : masks(row));
    const prng = new Prng(31);
    const first = new Array(VOCAB).fill(0);
    const second = new Array(VOCAB).fill(0);
    let pairs = 0;
    for (let i = 0; i < N; i++) {
      const d = [draw(q0, prng.nextFloat()), draw(q1, prng.nextFloat())];
      const r = acceptSampled(rows3, VOCAB, d, [q0, q1], o, [], prng, masks3);
      first[r.accepted >= 1 ? d[0] : r.next]++;
      // Row 1's law does not depend on the first token here, so the second emitted token (when there is one) follows p1.
      if (r.accepted >= 1) {
        second[r.accepted === 2 ? d[1] : r.next]++;
        pairs++;
      }
    }
    expect(chiSquare(first, p0, N)).toBeLessThan(CHI2_999[4]);
    expect(chiSquare(second, p1, pairs)).toBeLessThan(CHI2_999[2]);
  });

  it('a wrong rule is caught: verifying against the unmasked rows emits tokens the grammar forbids', () => {
    const prng = new Prng(7);
    const want = full(targetDistribution(L0, { temperature: 1 }, [], MASK0));
    const counts = new Array(VOCAB).fill(0);
    for (let i = 0; i < 2000; i++) {
      const r = acceptSampled(rows, VOCAB, [6], [null], { temperature: 1 }, [], prng);
      counts[r.accepted === 1 ? 6 : r.next]++;
    }
    expect(chiSquare(counts, want, 2000)).toBe(Infinity);
  });
});
