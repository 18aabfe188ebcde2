/**
 * Sampled speculative decoding on a real engine (synthetic:tiny f16 target):
 * the first token one verification emits follows the target's own law
 * (temperature 1, top-k 8, computed from the target's logits), with a draft
 * model (q8_0 copy) and with n-gram drafts; chi-square at the 0.999 level.
 * A misaligned verify row or a wrong rejection rule fails it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { SpeculativeSession } from '../../inference-core/speculative/index.ts';
import { targetDistribution } from '../../inference-core/speculative/target-distribution.ts';
import { draftPair, randomTokens } from './engine-fixtures.ts';

const TRIALS = 2500;
const CHI2_999_DF7 = 24.32;

describe('sampled speculative decoding keeps the target law', () => {
  let target: LoadedEngine;
  let draft: LoadedEngine;
  beforeAll(async () => {
    ({ target, draft } = await draftPair(8 * 2 ** 20));
  }, 60_000);
  afterAll(() => {
    target?.destroy();
    draft?.destroy();
  });

  it.each(['draft', 'ngram'] as const)('%s drafts: first emitted token ~ target law', (mode) => {
    const sampling = { temperature: 1, topK: 8 };
    const seq = target.createSequence();
    /** The target's law of the token after `context` (the KV is left holding all of it but the last token). */
    const lawAfter = (context: number[]) => {
      seq.truncate(0);
      seq.prefill(context.slice(0, -1));
      const rows = seq.prefill([context[context.length - 1]], { allLogits: true });
      seq.truncate(context.length - 1);
      return targetDistribution(rows, sampling, context);
    };
    // The context ends with an n-gram seen earlier, whose earlier continuation y is made a likely
    // next token (a few fixed-point rounds), so n-gram drafts are accepted sometimes, rejected sometimes.
    const head = randomTokens(6, target.vocabSize, 3, 4);
    const middle = randomTokens(9, target.vocabSize, 4, 4);
    let y = 5;
    let context: number[] = [];
    let law = lawAfter([...head, y, ...middle, ...head]);
    for (let round = 0; round < 6; round++) {
      y = law.ids[Math.min(1, law.ids.length - 1)];
      context = [...head, y, ...middle, ...head];
      law = lawAfter(context);
    }
    const counts = new Map<number, number>();
    let proposed = 0;
    let accepted = 0;
    for (let trial = 0; trial < TRIALS; trial++) {
      const session = new SpeculativeSession({ target: seq, context, sampling: { ...sampling, seed: trial }, mode, length: { mode: 'fixed', fixed: 3 }, ...(mode === 'draft' ? { draftEngine: draft } : {}) });
      const emitted = session.next();
      proposed += session.stats.proposed;
      accepted += session.stats.accepted;
      counts.set(emitted[0], (counts.get(emitted[0]) ?? 0) + 1);
      session.free();
      seq.truncate(context.length - 1);
    }
    seq.free();
    expect(proposed).toBeGreaterThan(0);
    // Both paths were taken: some drafts accepted, some rejected.
    expect(accepted).toBeGreaterThan(0);
    expect(accepted).toBeLessThan(proposed);
    let chi = 0;
    for (let i = 0; i < law.ids.length; i++) {
      const e = law.probs[i] * TRIALS;
      chi += ((counts.get(law.ids[i]) ?? 0) - e) ** 2 / e;
      counts.delete(law.ids[i]);
    }
    expect([...counts.keys()]).toEqual([]); // nothing outside the target's top-k
    expect(chi).toBeLessThan(CHI2_999_DF7);
  }, 120_000);
});
