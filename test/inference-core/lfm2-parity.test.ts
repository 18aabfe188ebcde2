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
import { ensureLfm2Model, type Lfm2WeightType } from '../../inference-core/synthetic/lfm2-synthetic.ts';
import { TEST_DATA_DIR, randomTokens } from './engine-fixtures.ts';
import { itMatchesLlamaCpp, loadParityCases, type ParityCase } from './logit-parity.ts';

const TYPES: Array<{ weightType: Lfm2WeightType; tolerance: number; nearTie: number }> = [
  { weightType: 'f16', tolerance: 1e-3, nearTie: 5e-3 },
  { weightType: 'q8_0', tolerance: 2e-2, nearTie: 5e-2 },
];
const LENGTHS = [1, 2, 3, 65, 200, 700];

let cases = new Map<Lfm2WeightType, ParityCase>();

beforeAll(async () => {
  const models = TYPES.map(({ weightType }): [Lfm2WeightType, string] => [weightType, ensureLfm2Model({ dataDir: TEST_DATA_DIR, weightType })]);
  cases = await loadParityCases(models, { poolBytes: 8 * 2 ** 20, lengths: LENGTHS, promptSeed: 500, greedySeed: 5151 });
}, 300_000);

afterAll(() => {
  for (const c of cases.values()) c.engine.destroy();
});

describe.each(TYPES)('lfm2-tiny, $weightType weights', ({ weightType, tolerance, nearTie }) => {
  const c = () => cases.get(weightType)!;
  itMatchesLlamaCpp('lfm2', weightType, c, LENGTHS, tolerance, nearTie);
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
