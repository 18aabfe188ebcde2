/**
 * lfm2 (short convolutions + attention) against llama.cpp (node-llama-cpp
 * 3.21.1's CPU build) on the same random-weight GGUF
 * (inference-core/synthetic/lfm2-synthetic.ts: conv conv attn conv conv attn):
 *   - last-position log-softmax for prompts of 1, 2, 3, 65, 200 and 700 tokens
 *     within f16 1e-3 (measured 3.4e-4 .. 9.1e-4, the largest at 1 token) /
 *     q8_0 2e-2 (measured 9.5e-3 .. 1.5e-2, as gemma3's q8_0) — same metric
 *     as llamacpp-parity.test.ts;
 *   - a 32-token greedy continuation of a 100-token prompt equal up to
 *     llama.cpp's first near-tie, teacher-forced argmax after (so every step
 *     runs the convolution state forward one token at a time);
 *   - K/V blocks alone are refused (KVT_ERR_ENGINE_SEQUENCE_STATE), never run
 *     on a missing convolution state.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { ensureLfm2Model, type Lfm2WeightType } from '../../inference-core/synthetic/lfm2-synthetic.ts';
import { llamaBatch, type LlamaBatchRequest } from '../helpers/llamacpp.ts';
import { TEST_DATA_DIR, randomTokens } from './engine-fixtures.ts';
import { expectGreedyParity, lastLogits, relError } from './logit-parity.ts';

const TYPES: Array<{ weightType: Lfm2WeightType; tolerance: number; nearTie: number }> = [
  { weightType: 'f16', tolerance: 1e-3, nearTie: 5e-3 },
  { weightType: 'q8_0', tolerance: 2e-2, nearTie: 5e-2 },
];
const LENGTHS = [1, 2, 3, 65, 200, 700];

interface Case {
  engine: LoadedEngine;
  prompts: number[][];
  greedyPrompt: number[];
  ref: (number | null)[][];
  refGreedy: { tokens: number[]; margins: number[] };
}
const cases = new Map<Lfm2WeightType, Case>();

beforeAll(async () => {
  const requests: LlamaBatchRequest[] = [];
  const pending: Array<Omit<Case, 'ref' | 'refGreedy'> & { weightType: Lfm2WeightType }> = [];
  for (const { weightType } of TYPES) {
    const modelPath = ensureLfm2Model({ dataDir: TEST_DATA_DIR, weightType });
    const engine = await loadEngine(modelPath, { kvDtype: 'f16', threads: 1, poolBytes: 8 * 2 ** 20 });
    const prompts = LENGTHS.map((n) => randomTokens(n, engine.vocabSize, 500 + n));
    const greedyPrompt = randomTokens(100, engine.vocabSize, 5151);
    pending.push({ weightType, engine, prompts, greedyPrompt });
    requests.push({ op: 'logitsMany', modelPath, prompts, kvType: 'f16', threads: 1 });
    requests.push({ op: 'greedy', modelPath, tokens: greedyPrompt, nPredict: 32, kvType: 'f16', threads: 1 });
  }
  const results = await llamaBatch(requests);
  pending.forEach((p, i) => {
    const g = results[2 * i + 1];
    cases.set(p.weightType, { ...p, ref: results[2 * i].logprobs!, refGreedy: { tokens: g.tokens!, margins: g.margins! } });
  });
}, 300_000);

afterAll(() => {
  for (const c of cases.values()) c.engine.destroy();
});

describe.each(TYPES)('lfm2-tiny, $weightType weights', ({ weightType, tolerance, nearTie }) => {
  const c = () => cases.get(weightType)!;
  it.each(LENGTHS.map((n, i) => [n, i]))(`last-position logits of a %i-token prompt within ${tolerance} of llama.cpp`, (n, i) => {
    const k = c();
    expect(k.ref[i]).toHaveLength(k.engine.vocabSize);
    const err = relError(lastLogits(k.engine, k.prompts[i]), k.ref[i]);
    console.log(`lfm2 parity ${weightType} n=${n}: relative error ${err.toExponential(2)} (tolerance ${tolerance})`);
    expect(err).toBeLessThan(tolerance);
  });
  it('greedy 32 tokens after a 100-token prompt equal up to llama.cpp’s first near-tie, teacher-forced argmax after', () => {
    const k = c();
    expectGreedyParity(k.engine, k.greedyPrompt, k.refGreedy, nearTie, `lfm2 greedy ${weightType}`);
  });
});

describe('lfm2 state outside the K/V pages', () => {
  it('imported K/V blocks without the convolution state are refused, not run', () => {
    const e = cases.get('f16')!.engine;
    const tokens = randomTokens(130, e.vocabSize, 8);
    const a = e.createSequence();
    a.prefill(tokens.slice(0, 128));
    const blocks = a.exportBlocks(0, 2);
    a.free();
    const b = e.createSequence();
    b.importBlocks(blocks);
    expect(() => b.prefill(tokens.slice(128))).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_SEQUENCE_STATE' }));
    b.free();
    const t = e.createSequence();
    t.prefill(tokens.slice(0, 100));
    t.truncate(64);
    expect(() => t.prefill(tokens.slice(64, 70))).toThrow(expect.objectContaining({ code: 'KVT_ERR_ENGINE_SEQUENCE_STATE' }));
    t.free();
  });
});
