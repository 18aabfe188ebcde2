/**
 * A drafter's memory across requests (drafter-memory.ts) on hand-made
 * policies: a request on a drafter whose drafts failed skips the first-step
 * probe and goes on with the drafter's probe schedule (the gap doubles across
 * requests, bounded); one whose drafts paid drafts,
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
    // the next request: no probe at step 1; it goes on with the drafter's schedule: the gap doubled by the first
    // request's failed probe (100), of which that request's 69 steps after its probe are already run
    const next = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    expect(next.startDrafting()).toBe(false);
    next.record(0, 0);
    expect(draftingSteps(next, 119, () => false).map((s) => s + 1)).toEqual([31]);
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
    // the traffic turns predictable: the drafter's next probe (gap 200 after two failed ones: requests 1 and 3
    // probed at their steps 51 and 31, request 3's last 29 steps and requests 4-5's 120 count) hits, and drafting
    // comes back from that step on
    const p = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    const steps = draftingSteps(p, 80, () => true);
    expect(steps).toEqual(Array.from({ length: 30 }, (_, i) => 51 + i));
    expect(memory.accepted / memory.proposed).toBeGreaterThan(0.9);
    // and the request after it drafts from its first step
    const q = new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory });
    expect(q.startDrafting()).toBe(true);
    expect(q.isProbe).toBe(false);
  });

  it('on a drafter whose probes keep failing, short requests share probes: the gap doubles across requests up to 1024 steps', () => {
    const memory = new DrafterMemory();
    // 60 requests of 127 steps (a 128-token reply), drafts never accepted: where the drafter's probes fall, in steps
    // of all its requests one after another
    const at: number[] = [];
    for (let r = 0; r < 60; r++) {
      const steps = draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 127, () => false);
      at.push(...steps.map((s) => r * 127 + s));
    }
    // the first request's first step (nothing known yet), then gaps of 50 doubling per failed probe, capped at 1024
    expect(at.slice(0, 2)).toEqual([1, 51]);
    expect(at.slice(1).map((x, i) => at[i + 2]! - x).slice(0, -1)).toEqual([100, 200, 400, 800, 1024, 1024, 1024, 1024, 1024]);
    // 11 probes over 60 requests, where a probe per request (each restarting at the first gap) made 60
    expect(at.length).toBe(11);
    expect(memory.failedProbes).toBeGreaterThanOrEqual(5);
  });

  it("the bound: once the drafter's requests ran 1024 steps without a draft, the next request probes at its first step; a hit resets the schedule", () => {
    const memory = new DrafterMemory();
    draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 10, () => false);
    for (let i = 0; i < 30; i++) memory.noteProbe(false);
    expect(memory.failedProbes).toBe(20);
    memory.idleSteps = 1023;
    // the cap holds whatever the failures in a row: the 1024th step without a draft probes
    expect(draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 5, () => false)).toEqual([1]);
    // a request alone, however long, probes within its own first 1024 steps
    memory.idleSteps = 0;
    expect(draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 1100, () => false)).toEqual([1024]);
    // drafts that start paying: the probe hits, the schedule restarts at the first gap for later requests
    memory.idleSteps = 1023;
    draftingSteps(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }), 1, () => true);
    expect(memory.failedProbes).toBe(0);
    expect(new DraftLengthPolicy({ mode: 'adaptive', ...COSTS, memory }).probeGap).toBe(50);
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
