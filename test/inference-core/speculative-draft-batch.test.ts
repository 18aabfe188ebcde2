/**
 * Draft-model drafting batched across sequences (planSpeculativeBatch): four
 * replies whose draft steps share draft-engine forwards, verified together in
 * one target step, emit exactly what each session emits alone — greedy and
 * sampled (same seeds), fixed and adaptive length, plain and grammar-
 * constrained — with the same acceptance counts and byte-identical exported
 * KV blocks; and the draft engine really ran several sequences per forward.
 */
import { describe, expect, it } from 'vitest';

import { grammarOf, masksOf, vocabOf } from '../../inference-core/grammar/index.ts';
import type { LoadedEngine, StepItem } from '../../inference-core/engine/index.ts';
import { Sampler, type SamplingOptions } from '../../inference-core/sampling/sampler.ts';
import { DrafterMemory, GrammarCursor, planSpeculativeBatch, SpeculativeSession, type DraftLengthOptions } from '../../inference-core/speculative/index.ts';
import { draftPairForSuite } from '../helpers/suite-fixture.ts';
import { randomTokens } from './engine-fixtures.ts';

const GEN = 70;
let target: LoadedEngine;
let draft: LoadedEngine;
let stops: number[];
draftPairForSuite((pair) => ({ target, draft, stops } = pair));

const SCHEMA = { type: 'object', properties: { name: { type: 'string', maxLength: 12 }, tags: { type: 'array', items: { type: 'string', maxLength: 6 }, maxItems: 4 }, n: { type: 'integer' } }, required: ['name', 'tags', 'n'], additionalProperties: false };

interface Reply {
  tokens: number[];
  proposed: number;
  accepted: number;
  blocks: Buffer[];
}

/** Sessions after each one's first token (constrained: sampled under the grammar, which the session then carries). */
function start(prompts: number[][], sampling: SamplingOptions, length: DraftLengthOptions, constrained: boolean) {
  // each run's sessions share a drafter memory of their own, empty at the start (as a fresh engine's): the one the
  // engines keep would carry the first run's drafts into the second's first decisions
  const memory = new DrafterMemory();
  return prompts.map((p, i) => {
    const seq = target.createSequence();
    const s = { ...sampling, seed: (sampling.seed ?? 0) + i, stopTokens: constrained ? stops : [] };
    const sampler = new Sampler(s);
    let cursor = constrained ? GrammarCursor.start(masksOf(grammarOf({ kind: 'json_schema', schema: SCHEMA }), vocabOf(target.tokenizer)), GEN, stops) : null;
    const first = sampler.sample(seq.prefill(p), cursor?.mask());
    cursor = cursor?.advance(first) ?? null;
    const session = new SpeculativeSession({ target: seq, context: [...p, first], sampling: s, mode: 'draft', draftEngine: draft, length: { ...length, memory }, ...(cursor ? { constraint: cursor } : {}) });
    return { seq, session, out: [first] };
  });
}

const done = (r: { out: number[] }) => r.out.length >= GEN || stops.includes(r.out[r.out.length - 1]);

function finish(runs: ReturnType<typeof start>): Reply[] {
  return runs.map(({ seq, session, out }) => {
    const blocks = seq.exportBlocks(0, seq.fullBlocks).map((b) => Buffer.from(b));
    session.free();
    seq.free();
    return { tokens: out, proposed: session.stats.proposed, accepted: session.stats.accepted, blocks };
  });
}

function alone(prompts: number[][], sampling: SamplingOptions, length: DraftLengthOptions, constrained: boolean): Reply[] {
  const runs = start(prompts, sampling, length, constrained);
  for (const r of runs) while (!done(r)) r.out.push(...r.session.next(GEN - r.out.length));
  return finish(runs);
}

/** All sessions per step: drafts planned in one batch, verified in one target step (as the worker's scheduler does). */
function batched(prompts: number[][], sampling: SamplingOptions, length: DraftLengthOptions, constrained: boolean, draftSteps: number[]): Reply[] {
  const runs = start(prompts, sampling, length, constrained);
  const step = draft.step.bind(draft);
  draft.step = (items: readonly StepItem[]) => {
    draftSteps.push(items.length);
    return step(items);
  };
  try {
    for (;;) {
      const active = runs.filter((r) => !done(r));
      if (active.length === 0) break;
      const plans = planSpeculativeBatch(active.map((r) => ({ session: r.session, limit: GEN - r.out.length })));
      const rows = target.step(active.map((r, i) => ({ seq: r.seq, tokens: plans[i].tokens, logits: 'all' })));
      active.forEach((r, i) => r.out.push(...r.session.complete(rows[i]!)));
    }
  } finally {
    draft.step = step;
  }
  return finish(runs);
}

const prompts = () => [randomTokens(40, target.vocabSize, 1, 4), randomTokens(90, target.vocabSize, 2, 4), randomTokens(15, target.vocabSize, 3, 4), randomTokens(130, target.vocabSize, 4, 4)];

describe('draft-model drafting batched across sequences', () => {
  const cases: Array<[string, SamplingOptions, DraftLengthOptions, boolean]> = [
    ['greedy, fixed 5', { temperature: 0 }, { mode: 'fixed', fixed: 5 }, false],
    ['greedy, adaptive', { temperature: 0 }, { mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 }, false],
    ['temperature 0.8, fixed 4', { temperature: 0.8, seed: 11 }, { mode: 'fixed', fixed: 4 }, false],
    ['greedy, constrained, fixed 5', { temperature: 0 }, { mode: 'fixed', fixed: 5 }, true],
    ['temperature 1, constrained, adaptive', { temperature: 1, seed: 5 }, { mode: 'adaptive', rowCost: 0.1, draftCost: 0.05 }, true],
  ];
  for (const [name, sampling, length, constrained] of cases) {
    it(`${name}: same tokens, acceptance and KV blocks as each sequence alone; draft forwards shared`, () => {
      const want = alone(prompts(), sampling, length, constrained);
      const draftSteps: number[] = [];
      const got = batched(prompts(), sampling, length, constrained, draftSteps);
      expect(got.map((r) => r.tokens)).toEqual(want.map((r) => r.tokens));
      expect(got.map((r) => [r.proposed, r.accepted])).toEqual(want.map((r) => [r.proposed, r.accepted]));
      got.forEach((r, i) => {
        expect(r.blocks.length).toBe(want[i].blocks.length);
        r.blocks.forEach((b, j) => expect(b.equals(want[i].blocks[j])).toBe(true));
      });
      expect(want.reduce((s, r) => s + r.proposed, 0)).toBeGreaterThan(20);
      // Most draft forwards carried several sequences.
      expect(Math.max(...draftSteps)).toBe(4);
      expect(draftSteps.filter((n) => n >= 2).length).toBeGreaterThan(draftSteps.length / 2);
    }, 120_000);
  }
});
