/**
 * DeepSeek MoE routing (engine/deepseek-routing.ts) on hand-made logits, as
 * llama.cpp's build_moe_ffn routes: the selection bias only picks experts
 * (weights are the unbiased probabilities), group-limited routing scores a
 * group by the sum of its two best values and can drop the single best
 * expert, normalisation then scaling; rows are grouped by expert with their slot.
 */
import { describe, expect, it } from 'vitest';
import { groupByExpert, routeTokens, type RoutingConfig } from '../../inference-core/engine/deepseek-routing.ts';

const sigmoid = (x: number) => 1 / (1 + Math.exp(-x));

describe('routeTokens', () => {
  it('softmax, top-2, no normalisation (V2-Lite): weights are the softmax probabilities, best first', () => {
    const c: RoutingConfig = { experts: 4, used: 2, gating: 'softmax', groups: 0, groupsUsed: 0, norm: false, scale: 1 };
    const r = routeTokens(Float32Array.of(0, 1, 3, 2), 1, c);
    const z = 1 + Math.E + Math.exp(3) + Math.exp(2);
    expect([...r.experts]).toEqual([2, 3]);
    expect(r.weights[0]).toBeCloseTo(Math.exp(3) / z, 6);
    expect(r.weights[1]).toBeCloseTo(Math.exp(2) / z, 6);
  });

  it('sigmoid with exp_probs_b: the bias picks, the unbiased probabilities weigh; normalised, then × scale', () => {
    const c: RoutingConfig = { experts: 4, used: 2, gating: 'sigmoid', groups: 0, groupsUsed: 0, norm: true, scale: 2.5 };
    const logits = Float32Array.of(2, 1, 0, -1);
    // without the bias: experts 0 and 1
    expect([...routeTokens(logits, 1, c).experts]).toEqual([0, 1]);
    // a bias that lifts expert 3 above expert 1 (but not above 0)
    const r = routeTokens(logits, 1, c, Float32Array.of(0, 0, 0, 0.6));
    expect([...r.experts]).toEqual([0, 3]);
    const p0 = sigmoid(2);
    const p3 = sigmoid(-1);
    expect(r.weights[0]).toBeCloseTo((p0 / (p0 + p3)) * 2.5, 5);
    expect(r.weights[1]).toBeCloseTo((p3 / (p0 + p3)) * 2.5, 5);
  });

  it('groups: a group is scored by its two best values, so the single best expert can be left out', () => {
    // 8 experts, 4 groups of 2, 2 groups used. Group 0 = {9, -9}: best expert, weak group (sum 0.5 in sigmoid space).
    const c: RoutingConfig = { experts: 8, used: 2, gating: 'sigmoid', groups: 4, groupsUsed: 2, norm: false, scale: 0 };
    const logits = Float32Array.of(9, -9, 2, 2, 1.5, 1.5, -3, -3);
    const r = routeTokens(logits, 1, c);
    // groups 1 (≈1.76) and 2 (≈1.63) beat group 0 (≈1.0001): experts 2 and 3 (group 1), not expert 0
    expect([...r.experts].sort()).toEqual([2, 3]);
    // without groups expert 0 wins
    expect(routeTokens(logits, 1, { ...c, groups: 0 }).experts[0]).toBe(0);
  });

  it('each row routes on its own logits; groupByExpert lists each picked expert once with its rows and slots', () => {
    const c: RoutingConfig = { experts: 3, used: 2, gating: 'softmax', groups: 0, groupsUsed: 0, norm: true, scale: 1 };
    const logits = Float32Array.of(3, 2, 1, /* row 1 */ 1, 3, 2, /* row 2 */ 3, 1, 2);
    const r = routeTokens(logits, 3, c);
    expect([...r.experts]).toEqual([0, 1, 1, 2, 0, 2]);
    const row1 = routeTokens(logits.subarray(3, 6), 1, c);
    expect([...r.weights.subarray(2, 4)]).toEqual([...row1.weights]);
    const groups = groupByExpert(r, 3, 2, 3);
    expect(groups.map((g) => ({ e: g.expert, rows: [...g.rows], slots: [...g.slots] }))).toEqual([
      { e: 0, rows: [0, 2], slots: [0, 0] },
      { e: 1, rows: [0, 1], slots: [1, 0] },
      { e: 2, rows: [1, 2], slots: [1, 1] },
    ]);
  });
});
