/**
 * Batched decode: 8 sequences of different lengths decoded together (one
 * forward, one GEMM over their 8 rows per weight) must each give exactly the
 * logits of their solo run.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EngineError, type LoadedEngine, type Sequence } from '../../inference-core/engine/index.ts';
import { argmax, randomTokens, tinyEngine } from './engine-fixtures.ts';

describe('decodeBatch', () => {
  let engine: LoadedEngine;
  beforeAll(async () => {
    engine = await tinyEngine({ weightType: 'q8_0', kvDtype: 'f16', poolBytes: 16 * 2 ** 20 });
  });
  afterAll(() => engine?.destroy());

  it('8 concurrent sequences decoded as a batch each equal their solo run', () => {
    const prompts = Array.from({ length: 8 }, (_, i) => randomTokens(5 + i * 19, engine.vocabSize, 50 + i));
    const steps = 20;

    const solo: Float32Array[][] = prompts.map((p) => {
      const s = engine.createSequence();
      let l = s.prefill(p);
      const out = [l];
      for (let t = 0; t < steps; t++) {
        l = s.decode(argmax(l));
        out.push(l);
      }
      s.free();
      return out;
    });

    const seqs: Sequence[] = prompts.map(() => engine.createSequence());
    let logits = seqs.map((s, i) => s.prefill(prompts[i]));
    for (let t = 0; t < steps; t++) {
      logits = engine.decodeBatch(seqs, logits.map(argmax));
      for (let i = 0; i < seqs.length; i++) {
        expect(Buffer.from(logits[i].buffer, logits[i].byteOffset, logits[i].byteLength).equals(Buffer.from(solo[i][t + 1].buffer))).toBe(true);
      }
    }
    for (let i = 0; i < seqs.length; i++) expect(seqs[i].length).toBe(prompts[i].length + steps);
    for (const s of seqs) s.free();
  });

  it('rejects a mismatched batch and a repeated sequence with typed errors', () => {
    const a = engine.createSequence();
    a.prefill([1, 2]);
    for (const fn of [() => engine.decodeBatch([a], [1, 2]), () => engine.decodeBatch([a, a], [1, 2])]) {
      try {
        fn();
        expect.unreachable();
      } catch (e) {
        expect((e as EngineError).code).toBe('KVT_ERR_ENGINE_BAD_ARGUMENT');
      }
    }
    expect(a.length).toBe(2);
    a.free();
  });

  it('a batch that needs more pages than are free fails whole, leaving every sequence as it was', async () => {
    const small = await tinyEngine({ weightType: 'q8_0', kvDtype: 'f16', poolBytes: 3 * engine.kvLayout.blockBytes });
    try {
      // a and b sit exactly on a block boundary: each needs a new page for its next token.
      const a = small.createSequence();
      const b = small.createSequence();
      a.prefill(randomTokens(64, small.vocabSize, 1));
      b.prefill(randomTokens(64, small.vocabSize, 2));
      const c = small.createSequence();
      c.prefill([5]); // takes the last page
      expect(small.pool.freePages).toBe(0);
      try {
        small.decodeBatch([c, a, b], [1, 2, 3]);
        expect.unreachable();
      } catch (e) {
        expect((e as EngineError).code).toBe('KVT_ERR_ENGINE_POOL_EXHAUSTED');
      }
      expect([a.length, b.length, c.length]).toEqual([64, 64, 1]);
      expect(small.pool.freePages).toBe(0);
      c.free();
      // One page free now: a alone can step, a and b together cannot.
      expect(() => small.decodeBatch([a, b], [1, 2])).toThrow(EngineError);
      expect(small.pool.freePages).toBe(1);
      expect(small.decodeBatch([a], [1])[0].length).toBe(small.vocabSize);
      expect(a.length).toBe(65);
    } finally {
      small.destroy();
    }
  });
});

describe('step (chunked prefill mixed with decode)', () => {
  let engine: LoadedEngine;
  beforeAll(async () => {
    engine = await tinyEngine({ weightType: 'f16', kvDtype: 'f16', poolBytes: 16 * 2 ** 20 });
  });
  afterAll(() => engine?.destroy());

  const bytes = (a: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength);

  it('prefill chunks and decode rows in one forward each equal their solo run, bit for bit', () => {
    const long = randomTokens(300, engine.vocabSize, 7);
    const shortA = randomTokens(37, engine.vocabSize, 8);
    const shortB = randomTokens(90, engine.vocabSize, 9);
    // Solo: one prefill call per prompt, then greedy decode.
    const solo = [long, shortA, shortB].map((p) => {
      const s = engine.createSequence();
      let l = s.prefill(p);
      const out = [l];
      for (let t = 0; t < 6; t++) out.push((l = s.decode(argmax(l))));
      s.free();
      return out;
    });
    // Mixed: a and b decode while `long` is prefilled in chunks of 100, 100, 100 riding along.
    const [seqL, seqA, seqB] = [engine.createSequence(), engine.createSequence(), engine.createSequence()];
    let [la, lb] = engine.step([
      { seq: seqA, tokens: shortA, logits: true },
      { seq: seqB, tokens: shortB, logits: true },
    ]) as Float32Array[];
    expect(bytes(la).equals(bytes(solo[1][0]))).toBe(true);
    expect(bytes(lb).equals(bytes(solo[2][0]))).toBe(true);
    let lastLong: Float32Array | null = null;
    for (let chunk = 0; chunk < 3; chunk++) {
      const isLast = chunk === 2;
      const out = engine.step([
        { seq: seqA, tokens: [argmax(la)], logits: true },
        { seq: seqL, tokens: long.slice(chunk * 100, chunk * 100 + 100), logits: isLast },
        { seq: seqB, tokens: [argmax(lb)], logits: true },
      ]);
      [la, lastLong, lb] = [out[0]!, out[1], out[2]!];
      expect(bytes(la).equals(bytes(solo[1][chunk + 1]))).toBe(true);
      expect(bytes(lb).equals(bytes(solo[2][chunk + 1]))).toBe(true);
      if (!isLast) expect(lastLong).toBeNull();
    }
    expect(bytes(lastLong!).equals(bytes(solo[0][0]))).toBe(true);
    // The chunked sequence's KV is the solo one: its decode continues identically.
    let l = lastLong!;
    for (let t = 1; t <= 6; t++) {
      l = engine.step([{ seq: seqL, tokens: [argmax(l)], logits: true }])[0]!;
      expect(bytes(l).equals(bytes(solo[0][t]))).toBe(true);
    }
    expect([seqL.length, seqA.length, seqB.length]).toEqual([306, 40, 93]);
    for (const s of [seqL, seqA, seqB]) s.free();
  });

  it('a truncated sequence continues exactly like a fresh one holding the same tokens', () => {
    const shared = randomTokens(150, engine.vocabSize, 61);
    const first = [...shared, ...randomTokens(150, engine.vocabSize, 62)];
    const second = [...shared, ...randomTokens(25, engine.vocabSize, 63)];
    const fresh = engine.createSequence();
    const expected = fresh.prefill(second);
    fresh.free();
    const reused = engine.createSequence();
    reused.prefill(first); // 300 tokens: 5 pages
    const before = engine.pool.freePages;
    reused.truncate(shared.length); // mid-page: keeps pages 0..2 (stale K/V after token 150 in page 2)
    expect(engine.pool.freePages).toBe(before + 2);
    expect(reused.length).toBe(150);
    const got = reused.prefill(second.slice(150));
    expect(bytes(got).equals(bytes(expected))).toBe(true);
    expect(() => reused.truncate(reused.length + 1)).toThrow(EngineError);
    reused.free();
  });

  it('rejects an over-budget step, an empty item and a repeated sequence before touching any sequence', () => {
    const a = engine.createSequence();
    const b = engine.createSequence();
    a.prefill([1, 2, 3]);
    const free = engine.pool.freePages;
    const cases = [
      () => engine.step([{ seq: a, tokens: [1], logits: true }, { seq: b, tokens: randomTokens(engine.prefillChunk, engine.vocabSize, 3), logits: false }]),
      () => engine.step([{ seq: a, tokens: [], logits: true }]),
      () => engine.step([{ seq: a, tokens: [1], logits: true }, { seq: a, tokens: [2], logits: true }]),
      () => engine.step([{ seq: b, tokens: [1], logits: true }, { seq: a, tokens: [engine.vocabSize], logits: true }]),
    ];
    for (const fn of cases) {
      try {
        fn();
        expect.unreachable();
      } catch (e) {
        expect((e as EngineError).code).toMatch(/^KVT_ERR_ENGINE_BAD_(ARGUMENT|TOKEN)$/);
      }
    }
    expect([a.length, b.length, engine.pool.freePages]).toEqual([3, 0, free]);
    a.free();
    b.free();
  });
});
