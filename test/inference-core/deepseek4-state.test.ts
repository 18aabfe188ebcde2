/**
 * deepseek4 sequence state (inference-core/engine/deepseek4-state.ts): prefill
 * in chunks of 1, 7, 64 and 128 tokens, and interleaved with another sequence,
 * gives the same logits (bit for bit) as one pass; the state holds exactly the
 * bytes deepseek4StateBytes states (SWA window, compressed entries, indexer
 * keys, compressor rows of unfinished blocks) and no more; a cloned state is
 * an exact branch point (what speculative rollback needs).
 */
import { beforeAll, describe, expect, it } from 'vitest';

import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import { deepseek4StateBytes, deepseek4StateRates } from '../../inference-core/engine/deepseek4-state.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

let model: Deepseek4Model;
let tokens: number[];
let other: number[];

beforeAll(() => {
  model = new Deepseek4Model(ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' }));
  const rng = new Xoshiro128(77);
  tokens = Array.from({ length: 300 }, () => rng.nextU32() % 500);
  other = Array.from({ length: 300 }, () => rng.nextU32() % 500);
});

describe('deepseek4 state', () => {
  it('chunked prefill (1, 7, 64, 128) and interleaving with another sequence equal one pass', () => {
    const whole = model.eval(model.newState(), tokens);
    for (const chunk of [1, 7, 64, 128]) {
      const st = model.newState();
      let last: Float32Array | undefined;
      for (let i = 0; i < tokens.length; i += chunk) last = model.eval(st, tokens.slice(i, i + chunk));
      expect(Buffer.from(last!.buffer).equals(Buffer.from(whole.buffer)), `chunk ${chunk}`).toBe(true);
    }
    const a = model.newState();
    const b = model.newState();
    let la: Float32Array | undefined;
    for (let i = 0; i < tokens.length; i += 7) {
      la = model.eval(a, tokens.slice(i, i + 7));
      model.eval(b, other.slice(i, i + 5));
    }
    expect(Buffer.from(la!.buffer).equals(Buffer.from(whole.buffer))).toBe(true);
  }, 120_000);

  it('holds exactly the stated bytes at every length', () => {
    const st = model.newState();
    const c = model.cfg;
    for (let i = 0; i < tokens.length; i++) {
      model.step(st, tokens[i]!);
      expect(st.bytes(), `${i + 1} tokens`).toBe(deepseek4StateBytes(c, i + 1));
    }
    const { perTokenInWindow, perPosition } = deepseek4StateRates(c);
    // past the window and a whole HCA group, growth per 128 positions is the per-position rate
    expect(deepseek4StateBytes(c, 4096 + 128) - deepseek4StateBytes(c, 4096)).toBe(128 * perPosition);
    expect(perTokenInWindow).toBe(c.nLayer * c.headDim * 4);
  }, 120_000);

  it('a cloned state is an exact branch point', () => {
    const st = model.newState();
    model.eval(st, tokens.slice(0, 130));
    const branch = st.clone();
    model.eval(branch, other.slice(0, 9)); // a rejected draft: crosses CSA blocks
    const cont = model.eval(st, tokens.slice(130, 140));
    const fresh = model.eval(model.newState(), tokens.slice(0, 140));
    expect(Buffer.from(cont.buffer).equals(Buffer.from(fresh.buffer))).toBe(true);
    const again = st.clone();
    expect(again.bytes()).toBe(st.bytes());
    expect(Buffer.from(model.step(again, 5).buffer).equals(Buffer.from(model.step(st, 5).buffer))).toBe(true);
  }, 120_000);
});
