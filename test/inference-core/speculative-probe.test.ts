/**
 * Draft-model (and MTP) drafting after a run of rejections: the adaptive
 * policy stops drafting, then probes with one drafted token after a gap that
 * doubles while probes fail, and drafting comes back once probes are accepted
 * (a drafter that starts matching later). On real engines: a llama target
 * (f16) whose policy holds a past of rejected drafts, drafted for by its q8_0
 * copy (which matches it), gets drafting back, with greedy output unchanged.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { DraftLengthPolicy, SpeculativeSession } from '../../inference-core/speculative/index.ts';
import { TEST_DATA_DIR, argmax, greedyFrom, randomTokens } from './engine-fixtures.ts';
import { draftingSteps } from './draft-steps.ts';

describe('draft-model probes', () => {
  it('after rejections: 1-token probes with a doubling gap while they fail; accepted probes bring drafting back', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 });
    for (let i = 0; i < 20; i++) p.record(1, 0);
    expect(p.continueDrafting(0, 1, 1)).toBe(false);
    // failing probes: after 16, then 32, 64, 128 steps without drafting
    const failing = draftingSteps(p, 250, () => false);
    expect(failing).toEqual([16, 48, 112, 240]);
    // a probe drafts one token, verified by no row whatever its estimate: it is checked against the step's own row
    const q = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 });
    for (let i = 0; i < 20; i++) q.record(1, 0);
    for (let s = 1; s < 16; s++) expect(q.startDrafting()).toBe(false);
    expect(q.startDrafting()).toBe(true);
    expect(q.continueDrafting(1, 0.9, 1.9)).toBe(false);
    expect(q.draftModelLength([0.9, 0.9])).toBe(0);
    q.record(1, 1);
    // now the drafter matches: probes every step until drafting pays again, then every step drafts
    const back = draftingSteps(q, 40, () => true);
    expect(back.length).toBeGreaterThanOrEqual(38);
    expect(q.continueDrafting(0, 1, 1)).toBe(true);
    expect(q.draftModelLength([0.9, 0.9, 0.9])).toBeGreaterThan(1);
  });

  it("an expensive drafter's first probe gap is its measured probe cost over a 1 % budget, within [16, 64]", () => {
    // a probe costs β + γ + σ target steps: 0.3 + 0.15 + 0.05 = 0.5 → first gap 50, then 100, 200, …
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    for (let i = 0; i < 20; i++) p.record(1, 0);
    expect(p.probeGap).toBe(50);
    expect(draftingSteps(p, 400, () => false)).toEqual([50, 150, 350]);
    // 0.9 of a step (the MTP block on CPU): capped at 64, so a drafter that starts matching waits at most 64 steps
    const q = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.4, draftCost: 0.3, setupCost: 0.2 });
    for (let i = 0; i < 20; i++) q.record(1, 0);
    expect(draftingSteps(q, 300, () => false)).toEqual([64, 192]);
    // a cheap drafter keeps the 16-step first gap
    expect(new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.05, draftCost: 0.02 }).probeGap).toBe(16);
  });

  it('an expensive drafter whose drafts are rejected from the start: one draft, then probes 50 and 150 steps later', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    expect(draftingSteps(p, 200, () => false)).toEqual([1, 51, 151]);
  });

  it('an expensive drafter that is accepted (trained weights) drafts from the first step on and never stops', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    expect(draftingSteps(p, 100, () => true)).toEqual(Array.from({ length: 100 }, (_, i) => i + 1));
    expect(p.draftModelLength([0.9, 0.9, 0.9])).toBeGreaterThan(1);
  });

  it('an expensive drafter rejected at first, accepted later: drafting is back within the first gap and stays', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    // the first draft rejected, every later one accepted (text that turns predictable)
    let n = 0;
    const steps = draftingSteps(p, 120, () => ++n > 1);
    // the probe 50 steps later is accepted: from then on every step drafts
    expect(steps).toEqual([1, ...Array.from({ length: 70 }, (_, i) => 51 + i)]);
    expect(p.continueDrafting(0, 1, 1)).toBe(true);
  });

  it('a run of steps that draft nothing is decided at its first step: step times observed in it are weighed at the probe that ends it', () => {
    // acceptance 0.25 (two rejected drafts), β + γ = 0.2: the setup σ = setup time / step time decides
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, draftCost: 0.1 });
    p.record(1, 0);
    p.record(1, 0);
    p.observeDraftSetup(10);
    p.observeVerify(1, 10);
    // σ = 1: no drafting; the run lasts up to the first probe gap (β + γ + σ = 1.2 over 1 %: capped at 64)
    expect(p.startDrafting()).toBe(false);
    expect(p.probeGap).toBe(64);
    // slower steps make σ small enough to draft (0.01), but inside the run nothing is asked again
    for (let i = 0; i < 16; i++) p.observeVerify(1, 1000);
    expect(p.continueDrafting(0, 1, 1)).toBe(true);
    for (let s = 2; s < 64; s++) expect(p.startDrafting()).toBe(false);
    // the run's last step weighs the costs again: it drafts, verified (not a probe)
    expect(p.startDrafting()).toBe(true);
    expect(p.isProbe).toBe(false);
  });

  it("a drafting step's setup counts in starting to draft; measured costs: the fastest recent draft step, the setup's running mean", () => {
    // acceptance 0.5 (prior): β + γ = 0.45 drafts, with σ = 0.1 on top it does not
    expect(new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15 }).continueDrafting(0, 1, 1)).toBe(true);
    expect(new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.1 }).continueDrafting(0, 1, 1)).toBe(false);
    const m = new DraftLengthPolicy({ mode: 'adaptive' });
    for (let i = 0; i < 4; i++) m.observeVerify(1, 10);
    // a cold first draft step (30 ms) is not what a draft step costs
    m.observeDraftStep(30);
    m.observeDraftStep(2);
    m.observeDraftStep(3);
    expect(m.draftCost).toBeCloseTo(0.2, 9);
    expect(m.setupCost).toBe(0);
    m.observeDraftSetup(5);
    expect(m.setupCost).toBeCloseTo(0.5, 9);
  });

  it("a request's first model draft is a probe (checked, not verified); its miss does not double the gap", () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    expect(p.startDrafting()).toBe(true);
    expect(p.draftModelLength([0.9, 0.9, 0.9])).toBe(0);
    p.record(1, 0);
    expect(p.probeGap).toBe(50);
    // a checked hit: the next step drafts and verifies as usual
    const q = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.3, draftCost: 0.15, setupCost: 0.05 });
    q.startDrafting();
    q.record(1, 1);
    expect(q.startDrafting()).toBe(true);
    expect(q.draftModelLength([0.9, 0.9, 0.9])).toBeGreaterThan(1);
  });

  it('fixed lengths never probe: they always draft', () => {
    const p = new DraftLengthPolicy({ mode: 'fixed', fixed: 3 });
    for (let i = 0; i < 20; i++) p.record(3, 0);
    expect(draftingSteps(p, 10, () => false)).toEqual([1, 2, 3, 4, 5, 6, 7, 8, 9, 10]);
  });
});

describe('a draft model that starts matching after rejections gets drafting back (llama f16 target, q8_0 draft)', () => {
  const opts = { dataDir: TEST_DATA_DIR, threads: 1, poolBytes: 8 * 2 ** 20, kvDtype: 'f16' as const };
  let target: LoadedEngine;
  let draft: LoadedEngine;
  beforeAll(async () => {
    target = await loadEngine('synthetic:tiny', { ...opts, weightType: 'f16' });
    draft = await loadEngine('synthetic:tiny', { ...opts, weightType: 'q8_0' });
  }, 120_000);
  afterAll(() => {
    target?.destroy();
    draft?.destroy();
  });

  it('drafts again and emits what plain greedy decoding does', () => {
    const prompt = randomTokens(40, target.vocabSize, 31, 4);
    const GEN = 90;
    const plain = target.createSequence();
    const want = greedyFrom(plain, plain.prefill(prompt), GEN);
    plain.free();
    const seq = target.createSequence();
    const first = argmax(seq.prefill(prompt));
    const session = new SpeculativeSession({ target: seq, context: [...prompt, first], sampling: { temperature: 0 }, mode: 'draft', draftEngine: draft, length: { mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 } });
    // the past: 20 verifications whose drafts were all rejected (the drafter matched nothing then)
    for (let i = 0; i < 20; i++) session.policy.record(1, 0);
    const got = [first];
    while (got.length < GEN) got.push(...session.next(GEN - got.length));
    session.free();
    seq.free();
    expect(got).toEqual(want);
    // drafting came back (a 1-token probe after 16 steps, checked against its step's row, then every step) and the drafts were taken
    expect(session.stats.checked).toBeGreaterThanOrEqual(1);
    expect(session.stats.checkHits).toBe(session.stats.checked);
    expect(session.stats.verifications).toBeGreaterThan(20);
    expect(session.stats.accepted).toBeGreaterThanOrEqual(0.8 * session.stats.verifications);
    expect(session.stats.steps).toBeLessThan(GEN - 20);
  }, 120_000);
});
