import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { codeOf } from './engine-error-code.ts';
import { argmax, randomTokens, tinyEngine } from './engine-fixtures.ts';

describe('engine (synthetic:tiny)', () => {
  let engine: LoadedEngine;
  beforeAll(async () => {
    engine = await tinyEngine({ weightType: 'f32', kvDtype: 'f32' });
  });
  afterAll(() => engine?.destroy());

  it('exposes layout, fingerprint, tokenizer and config', () => {
    const c = engine.config;
    expect(engine.kvLayout).toEqual({
      layers: c.nLayers,
      kvHeads: c.nKvHeads,
      headDim: c.headDim,
      dtype: 'f32',
      tokensPerBlock: 64,
      blockBytes: c.nLayers * 2 * c.nKvHeads * 64 * c.headDim * 4,
    });
    expect(typeof engine.fingerprint).toBe('string');
    expect(engine.fingerprint.length).toBeGreaterThan(8);
    expect(engine.tokenizer.vocabSize).toBe(engine.vocabSize);
    const ids = Array.from(engine.tokenizer.encode('hello world'));
    const seq = engine.createSequence();
    const logits = seq.prefill(ids);
    expect(logits.length).toBe(engine.vocabSize);
    expect(logits.every(Number.isFinite)).toBe(true);
    expect(seq.length).toBe(ids.length);
    seq.free();
  });

  it('prefill then decode equals one longer prefill (same math, KV from pages)', () => {
    const toks = randomTokens(70, engine.vocabSize, 3);
    const a = engine.createSequence();
    const whole = a.prefill(toks);
    const b = engine.createSequence();
    b.prefill(toks.slice(0, 69));
    const stepped = b.decode(toks[69]);
    expect(argmax(stepped)).toBe(argmax(whole));
    let maxDiff = 0;
    for (let i = 0; i < whole.length; i++) maxDiff = Math.max(maxDiff, Math.abs(whole[i] - stepped[i]));
    expect(maxDiff).toBeLessThan(1e-4);
    a.free();
    b.free();
  });

  it('fresh engines with the same options have the same fingerprint; another KV dtype changes it', async () => {
    const same = await tinyEngine({ weightType: 'f32', kvDtype: 'f32' });
    const other = await tinyEngine({ weightType: 'f32', kvDtype: 'f16' });
    try {
      expect(same.fingerprint).toBe(engine.fingerprint);
      expect(other.fingerprint).not.toBe(engine.fingerprint);
    } finally {
      same.destroy();
      other.destroy();
    }
  });

  it('rejects bad tokens, context overflow and freed sequences with typed errors, state unchanged', () => {
    const seq = engine.createSequence();
    seq.prefill([1, 2, 3]);
    expect(codeOf(() => seq.prefill([engine.vocabSize]))).toBe('KVT_ERR_ENGINE_BAD_TOKEN');
    expect(codeOf(() => seq.prefill([-1]))).toBe('KVT_ERR_ENGINE_BAD_TOKEN');
    expect(codeOf(() => seq.prefill([1.5]))).toBe('KVT_ERR_ENGINE_BAD_TOKEN');
    expect(codeOf(() => seq.prefill([]))).toBe('KVT_ERR_ENGINE_BAD_ARGUMENT');
    const tooMany = new Array(engine.contextLength - 2).fill(1);
    expect(codeOf(() => seq.prefill(tooMany))).toBe('KVT_ERR_ENGINE_CONTEXT_OVERFLOW');
    expect(seq.length).toBe(3);
    expect(codeOf(() => seq.exportBlocks(0, 1))).toBe('KVT_ERR_ENGINE_BAD_ARGUMENT');
    seq.free();
    expect(codeOf(() => seq.decode(1))).toBe('KVT_ERR_ENGINE_SEQUENCE_FREED');
  });

  it('import needs a block boundary and payloads of the right size', () => {
    const src = engine.createSequence();
    src.prefill(randomTokens(64, engine.vocabSize, 9));
    const blocks = src.exportBlocks(0, 1);
    expect(blocks).toHaveLength(1);
    expect(blocks[0].byteLength).toBe(engine.kvLayout.blockBytes);
    const dst = engine.createSequence();
    dst.prefill([1]);
    expect(codeOf(() => dst.importBlocks(blocks))).toBe('KVT_ERR_ENGINE_SEQUENCE_STATE');
    const empty = engine.createSequence();
    expect(codeOf(() => empty.importBlocks([blocks[0].subarray(1)]))).toBe('KVT_ERR_ENGINE_BAD_BLOCK');
    expect(empty.length).toBe(0);
    empty.importBlocks(blocks);
    expect(empty.length).toBe(64);
    for (const s of [src, dst, empty]) s.free();
  });

  it('pool exhaustion is a typed error that corrupts no page; freeing returns pages', async () => {
    // A pool of 3 pages: two sequences of 64 tokens fill two; a third asking for 2 pages fails.
    const small = await tinyEngine({ weightType: 'f32', kvDtype: 'f32', poolBytes: 3 * engine.kvLayout.blockBytes });
    try {
      expect(small.pool.pages).toBe(3);
      const a = small.createSequence();
      const aLogits = a.prefill(randomTokens(64, small.vocabSize, 11));
      const aBlock = a.exportBlocks(0, 1)[0];
      const b = small.createSequence();
      b.prefill(randomTokens(64, small.vocabSize, 12));
      expect(small.pool.freePages).toBe(1);
      const c = small.createSequence();
      expect(codeOf(() => c.prefill(randomTokens(100, small.vocabSize, 13)))).toBe('KVT_ERR_ENGINE_POOL_EXHAUSTED');
      expect(c.length).toBe(0);
      expect(small.pool.freePages).toBe(1);
      // The failed call touched nothing: a's page is byte-identical.
      expect(Buffer.compare(Buffer.from(a.exportBlocks(0, 1)[0]), Buffer.from(aBlock))).toBe(0);
      // One decode step of `a` needs its second page and gets it.
      a.decode(5);
      expect(small.pool.freePages).toBe(0);
      expect(codeOf(() => b.prefill(new Array(64).fill(7)))).toBe('KVT_ERR_ENGINE_POOL_EXHAUSTED');
      a.free();
      expect(small.pool.freePages).toBe(2);
      const c2 = c.prefill(randomTokens(100, small.vocabSize, 13));
      expect(c2.length).toBe(small.vocabSize);
      expect(aLogits.length).toBe(small.vocabSize);
      b.free();
      c.free();
      expect(small.pool.freePages).toBe(3);
      expect(small.sequences).toBe(0);
    } finally {
      small.destroy();
    }
  });

  it('prefill longer than one chunk equals chunk-by-chunk prefill', () => {
    const toks = randomTokens(600, engine.vocabSize, 21);
    const a = engine.createSequence();
    const whole = a.prefill(toks);
    const b = engine.createSequence();
    b.prefill(toks.slice(0, 200));
    b.prefill(toks.slice(200, 513));
    const parts = b.prefill(toks.slice(513));
    expect(Array.from(parts)).toEqual(Array.from(whole));
    a.free();
    b.free();
  });

  it('allLogits returns every position, each equal to the last-position logits of its prefix', () => {
    const toks = randomTokens(130, engine.vocabSize, 31);
    const seq = engine.createSequence();
    const all = seq.prefill(toks, { allLogits: true });
    const V = engine.vocabSize;
    expect(all.length).toBe(130 * V);
    for (const n of [1, 64, 100, 130]) {
      const s = engine.createSequence();
      const last = s.prefill(toks.slice(0, n));
      expect(Array.from(all.subarray((n - 1) * V, n * V))).toEqual(Array.from(last));
      s.free();
    }
    seq.free();
  });
});
