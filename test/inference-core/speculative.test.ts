/**
 * Speculative decoding against plain decoding on real engines (synthetic
 * weights): greedy output token for token, and the KV / exported blocks byte
 * for byte after rollbacks (cache equivalence), for every architecture, with
 * n-gram drafts (fixed 5 and adaptive) and a draft model (a q8_0 copy of the
 * f16 target).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { SpeculativeSession, type SpeculativeMode } from '../../inference-core/speculative/index.ts';
import type { DraftLengthMode } from '../../inference-core/speculative/index.ts';
import { ensureArchVariantModel } from '../../inference-core/synthetic/arch-variants.ts';
import { TEST_DATA_DIR, argmax, randomTokens } from './engine-fixtures.ts';

const GEN = 96;

interface Model {
  name: string;
  target: () => Promise<LoadedEngine>;
  draft: () => Promise<LoadedEngine>;
}

const opts = { dataDir: TEST_DATA_DIR, threads: 1, poolBytes: 8 * 2 ** 20, kvDtype: 'f16' as const };
const variant = (v: 'qwen2-tied' | 'qwen3', w: 'f16' | 'q8_0') => loadEngine(ensureArchVariantModel(v, { dataDir: TEST_DATA_DIR, weightType: w }), opts);
const MODELS: Model[] = [
  { name: 'llama', target: () => loadEngine('synthetic:tiny', { ...opts, weightType: 'f16' }), draft: () => loadEngine('synthetic:tiny', { ...opts, weightType: 'q8_0' }) },
  { name: 'qwen2', target: () => variant('qwen2-tied', 'f16'), draft: () => variant('qwen2-tied', 'q8_0') },
  { name: 'qwen3', target: () => variant('qwen3', 'f16'), draft: () => variant('qwen3', 'q8_0') },
  { name: 'deepseek2', target: () => loadEngine('synthetic:deepseek-tiny:f16', opts), draft: () => loadEngine('synthetic:deepseek-tiny:q8_0', opts) },
];

/** A prompt with repeated spans, so n-gram lookups find matches (as an agent copying tool output). */
function copyHeavyPrompt(vocab: number, seed: number): number[] {
  const span = randomTokens(24, vocab, seed, 4);
  return [...randomTokens(20, vocab, seed + 1, 4), ...span, ...randomTokens(10, vocab, seed + 2, 4), ...span, ...span.slice(0, 12)];
}

function plainGreedy(engine: LoadedEngine, prompt: number[], n: number): { tokens: number[]; blocks: Uint8Array[]; length: number } {
  const seq = engine.createSequence();
  let logits = seq.prefill(prompt);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    const t = argmax(logits);
    out.push(t);
    if (i + 1 < n) logits = seq.decode(t);
  }
  const blocks = seq.exportBlocks(0, seq.fullBlocks);
  const length = seq.length;
  seq.free();
  return { tokens: out, blocks, length };
}

function speculativeGreedy(engine: LoadedEngine, prompt: number[], n: number, mode: SpeculativeMode, length: DraftLengthMode, draftEngine?: LoadedEngine) {
  const seq = engine.createSequence();
  const first = argmax(seq.prefill(prompt));
  const session = new SpeculativeSession({ target: seq, context: [...prompt, first], sampling: { temperature: 0 }, mode, length: { mode: length, rowCost: 0.1, draftCost: 0.05 }, ...(draftEngine ? { draftEngine } : {}) });
  const out = [first];
  while (out.length < n) out.push(...session.next(n - out.length));
  session.free();
  const blocks = seq.exportBlocks(0, seq.fullBlocks);
  const result = { tokens: out, blocks, length: seq.length, stats: { ...session.stats } };
  seq.free();
  return result;
}

describe.each(MODELS)('speculative greedy == plain greedy ($name)', (m) => {
  let target: LoadedEngine;
  let draft: LoadedEngine;
  beforeAll(async () => {
    target = await m.target();
    draft = await m.draft();
  }, 120_000);
  afterAll(() => {
    target?.destroy();
    draft?.destroy();
  });

  it.each([
    ['ngram', 'fixed'],
    ['ngram', 'adaptive'],
    ['draft', 'fixed'],
    ['draft', 'adaptive'],
  ] as const)('%s drafts, %s length: same tokens, same KV blocks', (mode, length) => {
    for (const seed of [1, 2]) {
      const prompt = copyHeavyPrompt(target.vocabSize, seed * 100);
      const plain = plainGreedy(target, prompt, GEN);
      const spec = speculativeGreedy(target, prompt, GEN, mode, length, mode === 'draft' ? draft : undefined);
      expect(spec.tokens).toEqual(plain.tokens);
      // Rolled-back drafts leave nothing behind: same length, exported blocks bit-identical.
      expect(spec.length).toBe(plain.length);
      expect(spec.blocks.length).toBe(plain.blocks.length);
      expect(spec.blocks.length).toBeGreaterThanOrEqual(2);
      for (let b = 0; b < plain.blocks.length; b++) expect(Buffer.from(spec.blocks[b]).equals(Buffer.from(plain.blocks[b]))).toBe(true);
      expect(spec.stats.proposed).toBeGreaterThan(0);
    }
  }, 120_000);

  it('a rejected draft that crossed into a new block leaves the KV and exported blocks as plain decoding', () => {
    const prompt = randomTokens(60, target.vocabSize, 7, 4);
    const plain = plainGreedy(target, prompt, 80);
    const seq = target.createSequence();
    const first = argmax(seq.prefill(prompt));
    // Verify 10 wrong drafts across the 64-token boundary: positions 61..70 written, then rolled back.
    const wrong = Array.from({ length: 10 }, (_, i) => (plain.tokens[1 + i] + 1) % target.vocabSize);
    const rows = seq.prefill([first, ...wrong], { allLogits: true });
    expect(seq.fullBlocks).toBe(1);
    seq.truncate(61);
    expect(seq.fullBlocks).toBe(0);
    expect(() => seq.exportBlocks(0, 1)).toThrow(/full blocks/);
    // Row 0 is the target's own next token: the verify pass gives the decode step's logits.
    const out = [first, argmax(rows.subarray(0, target.vocabSize))];
    let logits = seq.decode(out[1]);
    while (out.length < 80) {
      out.push(argmax(logits));
      if (out.length < 80) logits = seq.decode(out[out.length - 1]);
    }
    expect(out).toEqual(plain.tokens);
    const blocks = seq.exportBlocks(0, seq.fullBlocks);
    expect(blocks.length).toBe(plain.blocks.length);
    for (let b = 0; b < blocks.length; b++) expect(Buffer.from(blocks[b]).equals(Buffer.from(plain.blocks[b]))).toBe(true);
    seq.free();
  });

  it('verification rows equal decode logits bit for bit (Engine.step with logits: all, batched with another sequence)', () => {
    const prompt = randomTokens(30, target.vocabSize, 9, 4);
    const a = target.createSequence();
    a.prefill(prompt);
    const toks = [5, 6, 7, 8];
    const one = toks.map((t) => a.decode(t));
    a.free();
    const b = target.createSequence();
    b.prefill(prompt);
    const other = target.createSequence();
    other.prefill(prompt.slice(0, 11));
    const [rows, single] = target.step([
      { seq: b, tokens: toks, logits: 'all' },
      { seq: other, tokens: [3], logits: true },
    ]);
    expect(rows!.length).toBe(toks.length * target.vocabSize);
    expect(single!.length).toBe(target.vocabSize);
    for (let i = 0; i < toks.length; i++) expect(Buffer.from(rows!.slice(i * target.vocabSize, (i + 1) * target.vocabSize).buffer).equals(Buffer.from(one[i].buffer))).toBe(true);
    b.free();
    other.free();
  });
});
