/**
 * A drafter's memory across requests (drafter-memory.ts) on hand-made
 * policies: a request on a drafter whose drafts failed skips the first-step
 * probe and probes on the normal schedule; one whose drafts paid drafts,
 * verified, from its first step; a drafter nothing was judged on still
 * probes first; a later hit raises the memory again; the remembered times
 * stand in for a new request's costs.
 */
import { describe, expect, it } from 'vitest';
import { DraftLengthPolicy, DrafterMemory, drafterMemory } from '../../inference-core/speculative/index.ts';
import { draftingSteps } from './draft-steps.ts';

const COSTS = { rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 };

describe('drafter memory', () => {
  it("a request on a drafter whose drafts failed skips the first-step probe and probes at its first gap; a fresh drafter's request probes at once", () => {
    const memory = new DrafterMemory();
    // the first request on the drafter: nothing known, the first step probes (and misses)
    expect(draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 120, () => false)).toEqual([1, 51]);
    expect(memory.known).toBe(true);
    // the next request: no probe at step 1, the first probe on the normal schedule (gap 50)
    const next = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    expect(next.startDrafting()).toBe(false);
    next.record(0, 0);
    expect(draftingSteps(next, 119, () => false).map((s) => s + 1)).toEqual([50]);
    // without a memory (or with none given) every request probes first
    expect(draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS }), 10, () => false)).toEqual([1]);
    expect(draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory: null }), 10, () => false)).toEqual([1]);
  });

  it('a request on a drafter whose drafts paid drafts, verified, from its first step', () => {
    const memory = new DrafterMemory();
    draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 20, () => true);
    const p = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    expect(p.startDrafting()).toBe(true);
    expect(p.isProbe).toBe(false);
    expect(p.draftModelLength([0.9, 0.9, 0.9])).toBeGreaterThan(0);
  });

  it('drafts that start paying are seen at the next probe, and the memory rises with them', () => {
    const memory = new DrafterMemory();
    for (let r = 0; r < 5; r++) draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 60, () => false);
    const before = memory.accepted / memory.proposed;
    expect(before).toBe(0);
    // the traffic turns predictable: the request's probe at its first gap hits, and drafting comes back
    const p = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    const steps = draftingSteps(p, 80, () => true);
    expect(steps[0]).toBe(50);
    expect(steps.length).toBe(31);
    expect(memory.accepted / memory.proposed).toBeGreaterThan(0.9);
    // and the request after it drafts from its first step
    const q = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    expect(q.startDrafting()).toBe(true);
    expect(q.isProbe).toBe(false);
  });

  it("the remembered acceptance decays: about the last 8 judged drafts weigh; n-gram drafts are not the drafter's", () => {
    const m = new DrafterMemory();
    for (let i = 0; i < 100; i++) m.noteJudged(1, 0);
    expect(m.proposed).toBeCloseTo(8, 3);
    m.noteJudged(1, 1);
    expect(m.accepted).toBe(1);
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, memory: m });
    const before = m.proposed;
    p.record(4, 4, 3);
    expect(m.proposed).toBe(before);
  });

  it("the remembered times stand in for a new request's costs until its own are timed", () => {
    const memory = new DrafterMemory();
    const first = new DraftLengthPolicy({ mode: 'adaptive', memory });
    first.startDrafting();
    first.observeDraftSetup(8);
    first.observeDraftStep(2);
    first.record(1, 0);
    first.observeVerify(1, 4);
    expect(memory.times).toEqual({ stepMs: 4, draftMs: 2, setupMs: 8 });
    const next = new DraftLengthPolicy({ mode: 'adaptive', memory });
    expect(next.draftCost).toBeCloseTo(0.5, 9);
    expect(next.setupCost).toBeCloseTo(2, 9);
    // its own timings take over: a faster step makes the same draft step dearer
    next.observeVerify(1, 2);
    expect(next.draftCost).toBeCloseTo(1, 9);
  });

  it('one memory per (target, drafter) pair', () => {
    const [a, b] = [{}, {}];
    expect(drafterMemory(a, a)).toBe(drafterMemory(a, a));
    expect(drafterMemory(a, b)).not.toBe(drafterMemory(a, a));
    expect(drafterMemory(b, a)).not.toBe(drafterMemory(a, b));
  });
});
