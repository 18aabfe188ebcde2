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

/** Steps (1-based) at which `policy` starts a draft over `steps` steps, each draft recorded as `accepted(step)`. */
function draftingSteps(policy: DraftLengthPolicy, steps: number, accepted: (step: number) => boolean): number[] {
  const out: number[] = [];
  for (let s = 1; s <= steps; s++) {
    if (!policy.startDrafting()) {
      policy.record(0, 0);
      continue;
    }
    out.push(s);
    const k = Math.max(1, policy.draftModelLength([0.9, 0.9, 0.9]));
    policy.record(k, accepted(s) ? k : 0);
  }
  return out;
}

describe('draft-model probes', () => {
  it('after rejections: 1-token probes with a doubling gap while they fail; accepted probes bring drafting back', () => {
    const p = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 });
    for (let i = 0; i < 20; i++) p.record(1, 0);
    expect(p.continueDrafting(0, 1, 1)).toBe(false);
    // failing probes: after 16, then 32, 64, 128 steps without drafting
    const failing = draftingSteps(p, 250, () => false);
    expect(failing).toEqual([16, 48, 112, 240]);
    // a probe drafts one token and is verified whatever its estimate
    const q = new DraftLengthPolicy({ mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 });
    for (let i = 0; i < 20; i++) q.record(1, 0);
    for (let s = 1; s < 16; s++) expect(q.startDrafting()).toBe(false);
    expect(q.startDrafting()).toBe(true);
    expect(q.continueDrafting(1, 0.9, 1.9)).toBe(false);
    expect(q.draftModelLength([0.01, 0.01])).toBe(1);
    q.record(1, 1);
    // now the drafter matches: probes every step until drafting pays again, then every step drafts
    const back = draftingSteps(q, 40, () => true);
    expect(back.length).toBeGreaterThanOrEqual(38);
    expect(q.continueDrafting(0, 1, 1)).toBe(true);
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
    // drafting came back (a 1-token probe after 16 steps, then every step) and the drafts were taken
    expect(session.stats.verifications).toBeGreaterThan(20);
    expect(session.stats.accepted).toBeGreaterThanOrEqual(0.8 * session.stats.verifications);
    expect(session.stats.steps).toBeLessThan(GEN - 20);
  }, 120_000);
});
