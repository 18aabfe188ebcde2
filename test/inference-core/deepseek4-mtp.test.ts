/**
 * deepseek4 MTP drafting (the model's own nextn block, deepseek4-mtp.ts)
 * through SpeculativeSession on synthetic:deepseek4-tiny (f32; SWA 16,
 * ratios 0/4/128/4/128, indexer top-k below the prompt):
 *   - greedy output is the same with drafting on (adaptive and fixed lengths)
 *     and off; on random weights nearly every draft is rejected, so every
 *     verification rolls the state back;
 *   - rolling back a verification of [g, d1, d2, d3] to g + a accepted drafts
 *     leaves state bytes (SWA windows, compressor rows of unfinished groups,
 *     compressed entries, indexer keys, the MTP window, the trunk's last hidden
 *     state) equal to a run that only ever fed g + a drafts, across an HCA
 *     group end, and the next logits equal bit for bit;
 *   - decode steps leave the MTP window unkeyed until a draft is made, and a
 *     window keyed that late drafts bit for bit as one keyed after every forward;
 *   - at temperature 1 the first emitted token follows the target's law
 *     (chi-square, 0.999) with drafts both accepted and rejected.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine, type Sequence } from '../../inference-core/engine/index.ts';
import { argmax } from '../../inference-core/index.ts';
import type { Deepseek4Graph } from '../../inference-core/engine/deepseek4-graph.ts';
import type { Deepseek4LayerState, Deepseek4State } from '../../inference-core/engine/deepseek4-state.ts';
import { DrafterMemory, SpeculativeSession } from '../../inference-core/speculative/index.ts';
import { targetDistribution } from '../../inference-core/speculative/target-distribution.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

let mtp: LoadedEngine;
let plain: LoadedEngine;
const rng = new Xoshiro128(25);
const randomPrompt = (n: number) => Array.from({ length: n }, () => rng.nextU32() % 500);

beforeAll(async () => {
  const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  mtp = await loadEngine(file, { dataDir: TEST_DATA_DIR, threads: 1, maxBatch: 8, mtp: true });
  plain = await loadEngine(file, { dataDir: TEST_DATA_DIR, threads: 1, maxBatch: 8 });
}, 120_000);

afterAll(() => {
  mtp?.destroy();
  plain?.destroy();
});

function stateOf(engine: LoadedEngine, seq: Sequence): Deepseek4State {
  return (engine as unknown as { graph: Deepseek4Graph }).graph.stateOf(seq.id)!;
}

/** Every value the state holds, in a fixed order (maps by position). */
function stateBytes(st: Deepseek4State): Buffer {
  const parts: Buffer[] = [];
  const f32 = (v: Float32Array) => parts.push(Buffer.from(v.buffer, v.byteOffset, v.byteLength));
  const ints = (v: number[]) => parts.push(Buffer.from(Int32Array.from(v).buffer));
  const map = (m: Map<number, Float32Array>) => {
    const keys = [...m.keys()].sort((a, b) => a - b);
    ints(keys);
    keys.forEach((k) => f32(m.get(k)!));
  };
  const layer = (l: Deepseek4LayerState) => {
    ints([l.raw.length, l.entries.length, l.idxKeys.length, ...l.rawPos]);
    [...l.raw, ...l.entries, ...l.idxKeys].forEach(f32);
    [l.compKv, l.compScore, l.idxKv, l.idxScore].forEach(map);
  };
  ints([st.pos]);
  st.layers.forEach(layer);
  if (st.mtp) {
    // the rows the MTP window attends to (a rollback may leave fewer older rows kept): inputs, and keys where computed
    const rows = st.mtp.windowRows();
    ints([st.mtp.end, rows.length, ...rows.map((r) => r.token)]);
    rows.forEach((r) => {
      ints([r.hPrev ? 1 : 0, r.key ? 1 : 0]);
      [r.hPrev, r.key].forEach((v) => v && f32(v));
    });
  }
  if (st.hLast) f32(st.hLast);
  return Buffer.concat(parts);
}

function greedy(engine: LoadedEngine, prompt: number[], n: number): number[] {
  const seq = engine.createSequence();
  let logits = seq.prefill(prompt);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(argmax(logits));
    logits = seq.decode(out[i]!);
  }
  seq.free();
  return out;
}

/**
 * A 30-token context prefilled up to its last token, with the target's law after it (p) and the MTP
 * block's law for its first draft (q); the sequence is left at context.length − 1 tokens.
 */
function firstStepLaws(sampling: { temperature: number; topK: number }) {
  const context = randomPrompt(30);
  const seq = mtp.createSequence();
  seq.prefill(context.slice(0, -1));
  const g = context[context.length - 1]!;
  const p = targetDistribution(seq.prefill([g], { allLogits: true }), sampling, context);
  seq.truncate(context.length - 1);
  const q = targetDistribution(mtp.mtpDrafter(seq)!.step(g), sampling, context);
  return { context, seq, p, q };
}

describe('deepseek4 MTP drafting', () => {
  it('greedy output is identical with MTP drafting on (adaptive, fixed 3) and off', () => {
    // 120 prompt tokens + 40 generated: crosses the 16-token window many times and the 128-token HCA group end
    const prompt = randomPrompt(120);
    const want = greedy(plain, prompt, 40);
    for (const length of [{ mode: 'adaptive' as const, maxDraft: 7 }, { mode: 'fixed' as const, fixed: 3 }]) {
      const seq = mtp.createSequence();
      const first = argmax(seq.prefill(prompt));
      const session = new SpeculativeSession({ target: seq, context: [...prompt, first], sampling: { temperature: 0 }, mode: 'mtp', length });
      const got = [first];
      while (got.length < want.length) got.push(...session.next(want.length - got.length));
      expect(got).toEqual(want);
      // adaptive on random weights: the first draft and later probes are checked against plain steps' rows, never fed
      if (length.mode === 'fixed') expect(session.stats.verifications).toBeGreaterThan(0);
      else expect(session.stats.checked).toBeGreaterThan(0);
      expect(session.stats.proposed).toBeGreaterThan(session.stats.accepted);
      seq.free();
    }
  }, 120_000);

  it("the engine remembers its drafter: a fresh engine's first request probes at its first step, the next one does not; output unchanged", async () => {
    const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
    const fresh = await loadEngine(file, { dataDir: TEST_DATA_DIR, threads: 1, maxBatch: 8, mtp: true });
    try {
      const prompt = randomPrompt(60);
      const want = greedy(plain, prompt, 30);
      const firstSteps: SpeculativeSession['stats'][] = [];
      for (let request = 0; request < 2; request++) {
        const seq = fresh.createSequence();
        const first = argmax(seq.prefill(prompt));
        const session = new SpeculativeSession({ target: seq, context: [...prompt, first], sampling: { temperature: 0 }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7 } });
        const got = [first, ...session.next()];
        firstSteps.push({ ...session.stats });
        while (got.length < want.length) got.push(...session.next(want.length - got.length));
        expect(got).toEqual(want);
        seq.free();
      }
      // the first request's first step checked a drafted token (nothing was known of the drafter); the second
      // request's first step drafted nothing: the engine knew its drafts fail (random weights)
      expect(firstSteps[0]!.checked).toBe(1);
      expect(firstSteps[1]!.checked + firstSteps[1]!.verifications).toBe(0);
    } finally {
      fresh.destroy();
    }
  }, 120_000);

  it('a rejected draft is rolled back exactly: state bytes equal a run that never drafted', () => {
    // P = 126: the verified rows 126..129 cross position 127, where every HCA layer finishes its first entry
    const prompt = randomPrompt(127);
    const P = prompt.length - 1;
    const g = prompt[P]!;
    const drafts = [7, 301, 42];
    for (let a = 0; a <= drafts.length; a++) {
      const drafted = mtp.createSequence();
      drafted.prefill(prompt.slice(0, P));
      drafted.prefill([g, ...drafts], { allLogits: true });
      const fullBytes = stateBytes(stateOf(mtp, drafted));
      drafted.truncate(P + 1 + a);
      const never = mtp.createSequence();
      never.prefill(prompt.slice(0, P));
      never.prefill([g, ...drafts.slice(0, a)]);
      const kept = stateBytes(stateOf(mtp, never));
      // the check can fail: before the rollback the states differ (rows past the accepted ones were fed)
      if (a < drafts.length) expect(fullBytes.equals(kept)).toBe(false);
      expect(stateBytes(stateOf(mtp, drafted)).equals(kept)).toBe(true);
      expect(stateOf(mtp, drafted).mtp!.rows.length).toBeGreaterThan(0);
      // and both carry on alike (pages included): the next token's logits and the MTP draft after it
      const next = 99;
      expect(Buffer.from(drafted.decode(next).buffer).equals(Buffer.from(never.decode(next).buffer))).toBe(true);
      expect(Buffer.from(mtp.mtpDrafter(drafted)!.step(5).buffer).equals(Buffer.from(mtp.mtpDrafter(never)!.step(5).buffer))).toBe(true);
      drafted.free();
      never.free();
    }
  }, 120_000);

  it('the MTP window is keyed lazily (decode steps record inputs only) and drafts as one keyed along every forward', () => {
    const prompt = randomPrompt(40);
    const next = randomPrompt(24);
    const eager = mtp.createSequence();
    const lazy = mtp.createSequence();
    eager.prefill(prompt);
    lazy.prefill(prompt);
    for (const t of next) {
      eager.decode(t);
      // a drafter keys the window's new rows now: the window keyed after every forward, one row at a time
      expect(mtp.mtpDrafter(eager)).not.toBeNull();
      lazy.decode(t);
    }
    const lazyWindow = stateOf(mtp, lazy).mtp!;
    // nothing keyed along the decode steps: decoding without drafting runs no MTP arithmetic
    // (the prefill keyed its own rows in one batch; 24 steps later the 16-row window holds none of them)
    expect(lazyWindow.windowRows().every((r) => r.key === null)).toBe(true);
    expect(lazyWindow.rows.some((r) => r.key !== null)).toBe(true);
    const a = mtp.mtpDrafter(eager)!;
    const b = mtp.mtpDrafter(lazy)!;
    const keys = (s: Sequence) => Buffer.concat(stateOf(mtp, s).mtp!.keyed().raw.map((k) => Buffer.from(k.buffer, k.byteOffset, k.byteLength)));
    expect(keys(lazy).equals(keys(eager))).toBe(true);
    expect(lazyWindow.windowRows().length).toBe(16);
    // three draft steps, each token the previous draft: the same logits bit for bit
    let token = 11;
    for (let i = 0; i < 3; i++) {
      const la = a.step(token);
      const lb = b.step(token);
      expect(Buffer.from(lb.buffer).equals(Buffer.from(la.buffer))).toBe(true);
      token = argmax(la);
    }
    eager.free();
    lazy.free();
  }, 120_000);

  it('temperature 1: the first emitted token follows the target law (chi-square 0.999)', () => {
    const TRIALS = 2000;
    const sampling = { temperature: 1, topK: 0 };
    const { context, seq, p, q } = firstStepLaws(sampling);
    // bins: the 4 likeliest tokens under p, the 4 likeliest under q (where a wrong rule moves mass), the rest
    const top = (d: typeof p) => [...d.ids].map((id, i) => ({ id, pr: d.probs[i]! })).sort((x, y) => y.pr - x.pr).slice(0, 4).map((x) => x.id);
    const bins = [...new Set([...top(p), ...top(q)])];
    const prob = new Map<number, number>();
    p.ids.forEach((id, i) => prob.set(id, p.probs[i]!));
    const want = [...bins.map((id) => prob.get(id) ?? 0)];
    want.push(1 - want.reduce((s, x) => s + x, 0));
    const counts = new Array<number>(bins.length + 1).fill(0);
    let proposed = 0;
    let accepted = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const session = new SpeculativeSession({ target: seq, context, sampling: { ...sampling, seed: trial }, mode: 'mtp', length: { mode: 'fixed', fixed: 2 } });
      const emitted = session.next();
      proposed += session.stats.proposed;
      accepted += session.stats.accepted;
      const b = bins.indexOf(emitted[0]!);
      counts[b < 0 ? bins.length : b]++;
      seq.truncate(context.length - 1);
    }
    seq.free();
    // both paths were taken
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(proposed);
    let chi = 0;
    want.forEach((pr, i) => (chi += (counts[i]! - pr * TRIALS) ** 2 / (pr * TRIALS)));
    // upper 0.999 quantiles of chi-square by degrees of freedom (bins − 1)
    const CHI2_999 = [0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32, 26.12];
    expect(chi).toBeLessThan(CHI2_999[bins.length]!);
  }, 300_000);

  it("temperature 1, adaptive: the first draft is a checked probe; the token follows the target law, the check hits at the rejection rule's rate", () => {
    const TRIALS = 2000;
    const sampling = { temperature: 1, topK: 0 };
    const { context, seq, p, q } = firstStepLaws(sampling);
    const pOf = new Map<number, number>();
    p.ids.forEach((id, i) => pOf.set(id, p.probs[i]!));
    // a verification would accept the draft with probability Σ min(p, q)
    let overlap = 0;
    q.ids.forEach((id, i) => (overlap += Math.min(q.probs[i]!, pOf.get(id) ?? 0)));
    const bins = [...p.ids].map((id, i) => ({ id, pr: p.probs[i]! })).sort((x, y) => y.pr - x.pr).slice(0, 6).map((x) => x.id);
    const counts = new Array<number>(bins.length + 1).fill(0);
    let hits = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      // no drafter memory: each trial is a request nothing is known of the drafter for (its first draft probes)
      const session = new SpeculativeSession({ target: seq, context, sampling: { ...sampling, seed: trial }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7, memory: null } });
      const emitted = session.next();
      expect(emitted.length).toBe(1);
      expect(session.stats.checked).toBe(1);
      expect(session.stats.verifications).toBe(0);
      hits += session.stats.checkHits;
      const b = bins.indexOf(emitted[0]!);
      counts[b < 0 ? bins.length : b]++;
      seq.truncate(context.length - 1);
    }
    seq.free();
    const want = bins.map((id) => pOf.get(id)!);
    want.push(1 - want.reduce((s, x) => s + x, 0));
    let chi = 0;
    want.forEach((pr, i) => (chi += (counts[i]! - pr * TRIALS) ** 2 / (pr * TRIALS)));
    expect(chi).toBeLessThan(22.46); // chi-square 0.999, 6 degrees of freedom
    // the checks' hit count is binomial(TRIALS, Σ min(p, q)): within 4.5 standard deviations
    const sd = Math.sqrt(TRIALS * overlap * (1 - overlap));
    expect(Math.abs(hits - TRIALS * overlap)).toBeLessThan(4.5 * sd + 1);
  }, 300_000);

  it('temperature 1, a step that drafts nothing (a drafter remembered failing): the token follows the target law through next() and plan()/complete() alike', () => {
    const TRIALS = 2000;
    const sampling = { temperature: 1, topK: 0 };
    const { context, seq, p } = firstStepLaws(sampling);
    const bins = [...p.ids].map((id, i) => ({ id, pr: p.probs[i]! })).sort((x, y) => y.pr - x.pr).slice(0, 6).map((x) => x.id);
    const want = bins.map((id) => p.probs[[...p.ids].indexOf(id)]!);
    want.push(1 - want.reduce((s, x) => s + x, 0));
    for (const path of ['next', 'plan'] as const) {
      const counts = new Array<number>(bins.length + 1).fill(0);
      for (let trial = 0; trial < TRIALS; trial++) {
        // a drafter whose drafts kept failing, its last probe just made: this request's first step drafts nothing
        const memory = new DrafterMemory();
        for (let i = 0; i < 20; i++) memory.noteJudged(1, 0);
        const session = new SpeculativeSession({ target: seq, context, sampling: { ...sampling, seed: trial }, mode: 'mtp', length: { mode: 'adaptive', maxDraft: 7, memory } });
        let emitted: number[];
        if (path === 'next') emitted = session.next();
        else emitted = session.complete(seq.prefill(session.plan(8).tokens, { allLogits: true }));
        expect(emitted.length).toBe(1);
        expect(session.stats.checked + session.stats.verifications).toBe(0);
        const b = bins.indexOf(emitted[0]!);
        counts[b < 0 ? bins.length : b]++;
        seq.truncate(context.length - 1);
      }
      let chi = 0;
      want.forEach((pr, i) => (chi += (counts[i]! - pr * TRIALS) ** 2 / (pr * TRIALS)));
      expect(chi).toBeLessThan(22.46); // chi-square 0.999, 6 degrees of freedom
    }
    seq.free();
  }, 300_000);

  it('mode mtp is refused without an MTP engine; loading mtp for a model without the block is a typed error', async () => {
    const seq = plain.createSequence();
    seq.prefill([1, 2, 3]);
    expect(() => new SpeculativeSession({ target: seq, context: [1, 2, 3, 4], sampling: { temperature: 0 }, mode: 'mtp', length: { mode: 'fixed', fixed: 2 } })).toThrow(/mtp: true/);
    seq.free();
    await expect(loadEngine('synthetic:tiny', { dataDir: TEST_DATA_DIR, threads: 1, mtp: true })).rejects.toThrow(/MTP drafting runs deepseek4/);
  }, 60_000);
});
