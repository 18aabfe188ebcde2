/**
 * The rejection rule keeps the target's distribution: on a tiny vocabulary,
 * tokens emitted by speculative acceptance (draft-model q, or an n-gram point
 * mass) are drawn against p with a chi-square goodness-of-fit test. A rule
 * that accepted drafts unconditionally (or resampled from p instead of the
 * residual) fails these tests.
 */
import { describe, expect, it } from 'vitest';
import { Prng } from '../../inference-core/sampling/sampler.ts';
import { acceptOne, acceptSampled, type TokenDistribution } from '../../inference-core/speculative/index.ts';
import { targetDistribution } from '../../inference-core/speculative/target-distribution.ts';

const dist = (probs: number[]): TokenDistribution => {
  const ids: number[] = [];
  const ps: number[] = [];
  probs.forEach((p, i) => {
    if (p > 0) {
      ids.push(i);
      ps.push(p);
    }
  });
  return { ids: Int32Array.from(ids), probs: Float64Array.from(ps) };
};

function draw(d: TokenDistribution, prng: Prng): number {
  const u = prng.nextFloat();
  let acc = 0;
  for (let i = 0; i < d.ids.length; i++) {
    acc += d.probs[i];
    if (u < acc) return d.ids[i];
  }
  return d.ids[d.ids.length - 1];
}

/** Pearson chi-square of counts against expected probabilities. */
function chiSquare(counts: number[], probs: number[], n: number): number {
  let x = 0;
  for (let i = 0; i < probs.length; i++) {
    if (probs[i] === 0) {
      expect(counts[i]).toBe(0);
      continue;
    }
    const e = probs[i] * n;
    x += (counts[i] - e) ** 2 / e;
  }
  return x;
}
// Upper 0.999 quantiles of chi-square by degrees of freedom.
const CHI2_999: Record<number, number> = { 3: 16.27, 4: 18.47, 5: 20.52 };

const N = 40_000;
const P = [0.4, 0.25, 0.2, 0.1, 0.05, 0];

describe('rejection sampling keeps the target distribution (vocab of 6)', () => {
  it.each([
    ['draft q close to p', [0.3, 0.3, 0.2, 0.1, 0.05, 0.05]],
    ['draft q far from p', [0.05, 0.05, 0.1, 0.2, 0.3, 0.3]],
    ['draft q = p', P],
  ])('%s', (_name, q) => {
    const prng = new Prng(11);
    const p = dist(P);
    const qd = dist(q);
    const counts = new Array(P.length).fill(0);
    let accepted = 0;
    for (let i = 0; i < N; i++) {
      const d = draw(qd, prng);
      const r = acceptOne(p, qd, d, prng);
      if (r.accepted) accepted++;
      counts[r.token]++;
    }
    expect(chiSquare(counts, P, N)).toBeLessThan(CHI2_999[4]);
    // Acceptance rate is Σ min(p, q) (the overlap of the two laws).
    const overlap = P.reduce((s, pi, i) => s + Math.min(pi, q[i]), 0);
    expect(Math.abs(accepted / N - overlap)).toBeLessThan(0.015);
  });

  it.each([0, 1, 3, 5])('n-gram point mass on token %i', (drafted) => {
    const prng = new Prng(12 + drafted);
    const p = dist(P);
    const counts = new Array(P.length).fill(0);
    for (let i = 0; i < N; i++) counts[acceptOne(p, null, drafted, prng).token]++;
    expect(chiSquare(counts, P, N)).toBeLessThan(CHI2_999[4]);
  });

  it('a wrong rule is caught: always accepting the point-mass draft', () => {
    const counts = new Array(P.length).fill(0);
    for (let i = 0; i < N; i++) counts[i % 2 === 0 ? 1 : 0]++;
    expect(chiSquare(counts, P, N)).toBeGreaterThan(CHI2_999[4]);
  });

  it('two verified positions from logits (temperature 0.8, top-k 5): the pair law is the target chain', () => {
    // Row 0's law does not depend on history; row 1's law is a fixed table too here (no repetition penalty).
    const vocab = 6;
    const l0 = Float32Array.from([1.2, 0.8, 0.1, -0.3, 0.5, -2]);
    const l1 = Float32Array.from([0.2, 1.5, 0.9, 0.3, -1, 0.4]);
    const rows = new Float32Array(2 * vocab);
    rows.set(l0, 0);
    rows.set(l1, vocab);
    const o = { temperature: 0.8, topK: 5 };
    const p0 = targetDistribution(l0, o, []);
    const full0 = new Array(vocab).fill(0);
    p0.ids.forEach((id, i) => (full0[id] = p0.probs[i]));
    const prng = new Prng(5);
    const counts = new Array(vocab).fill(0);
    for (let i = 0; i < N; i++) {
      // Draft: n-gram proposes token 4 then 1; the first emitted token must follow p0.
      const r = acceptSampled(rows, vocab, [4], [null], o, [], prng);
      counts[r.accepted === 1 ? 4 : r.next]++;
    }
    expect(chiSquare(counts, full0, N)).toBeLessThan(CHI2_999[4]);
  });
});

describe('targetDistribution', () => {
  /** Plain reference: full sort (ties: lower id first), top-k, softmax, top-p — Sampler's pipeline. */
  function reference(logits: Float32Array, t: number, topK: number, topP: number): Map<number, number> {
    const ids = [...logits.keys()].sort((a, b) => logits[b] - logits[a] || a - b);
    const k = topK > 0 && topK < ids.length ? topK : ids.length;
    const w = ids.slice(0, k).map((id) => Math.exp((logits[id] - logits[ids[0]]) / t));
    const sum = w.reduce((a, b) => a + b, 0);
    let n = k;
    if (topP < 1) {
      let cum = 0;
      for (let i = 0; i < k; i++) {
        cum += w[i] / sum;
        if (cum >= topP) {
          n = i + 1;
          break;
        }
      }
    }
    const kept = w.slice(0, n).reduce((a, b) => a + b, 0);
    return new Map(ids.slice(0, n).map((id, i) => [id, w[i] / kept]));
  }

  it.each([
    [0, 1],
    [3, 1],
    [4, 1],
    [7, 1],
    [0, 0.8],
    [5, 0.6],
    [100, 1],
  ])('top-k %i, top-p %f: same law as the sorted pipeline, ties keep the lower id', (topK, topP) => {
    // Ties on purpose: ids 2, 5 and 9 share the top logit; 4 and 11 share another.
    const logits = Float32Array.from([0.1, -1, 2, 0.5, 1.25, 2, -0.3, 0.9, 0.2, 2, 0.0, 1.25, -2, 0.7]);
    const got = targetDistribution(logits, { temperature: 0.7, topK, topP }, []);
    const want = reference(logits, 0.7, topK, topP);
    const gotMap = new Map<number, number>();
    got.ids.forEach((id, i) => gotMap.set(id, got.probs[i]));
    expect([...gotMap.keys()].sort((a, b) => a - b)).toEqual([...want.keys()].sort((a, b) => a - b));
    for (const [id, p] of want) expect(gotMap.get(id)!).toBeCloseTo(p, 12);
  });
});
