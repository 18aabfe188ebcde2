/**
 * deepseek4 in the paged engine (loadEngine → Engine over Deepseek4Graph):
 *   - prefill and decode through Engine.step give the forward's logits bit for
 *     bit (deepseek4-forward.ts with the same native mat-vecs; the native and
 *     TypeScript mat-vecs are held together in deepseek4-native.test.ts), in one
 *     pass, in chunks, and batched with another sequence;
 *   - the compressed entries and indexer keys live in the sequence's pool pages
 *     (their arrays are views of the pool's memory, in the page of the block
 *     where their group ends), and the pool counts them: pages per sequence
 *     = ⌈tokens/64⌉, freed with the sequence;
 *   - every weight range the forward multiplies is uploaded and packed at load;
 *   - the engine says its state is not its pages (hasRecurrentState: the
 *     serving side turns the block tier off), and a sequence whose pages are
 *     not matched by its state is refused before any row runs (a truncation
 *     within the last forward's rows rolls the state back instead).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { loadEngine, type LoadedEngine } from '../../inference-core/engine/index.ts';
import { Deepseek4Model } from '../../inference-core/engine/deepseek4-forward.ts';
import type { Deepseek4Graph } from '../../inference-core/engine/deepseek4-graph.ts';
import { ensureDeepseek4Model, Xoshiro128 } from '../../inference-core/synthetic/index.ts';
import { readGguf, type GgufFile } from '../../inference-core/gguf/index.ts';
import { createBackend } from '../../native/index.ts';
import { TEST_DATA_DIR } from './engine-fixtures.ts';

let engine: LoadedEngine;
let reference: Deepseek4Model;
let referenceFile: GgufFile;
let tokens: number[];
let other: number[];

const same = (a: Float32Array, b: Float32Array) => Buffer.from(a.buffer, a.byteOffset, a.byteLength).equals(Buffer.from(b.buffer, b.byteOffset, b.byteLength));

beforeAll(async () => {
  const file = ensureDeepseek4Model('deepseek4-tiny', { dataDir: TEST_DATA_DIR, weightType: 'f32' });
  // rows per step ≥ 2 × 128: the chunk tests below send two sequences' 128-token chunks in one step
  engine = await loadEngine(file, { dataDir: TEST_DATA_DIR, prefillChunk: 256, maxBatch: 8 });
  // the engine runs the native mat-vecs: the same arithmetic here (deepseek4-native.test.ts holds both to the TypeScript loop)
  referenceFile = readGguf(file);
  reference = new Deepseek4Model(referenceFile);
  reference.useNative(createBackend(), referenceFile);
  const rng = new Xoshiro128(91);
  tokens = Array.from({ length: 200 }, () => rng.nextU32() % 500);
  other = Array.from({ length: 150 }, () => rng.nextU32() % 500);
}, 120_000);

afterAll(() => {
  engine?.destroy();
  referenceFile?.close();
});

describe('deepseek4 engine', () => {
  it('packs every weight range at load: a prefill that routes to every expert uploads nothing more', () => {
    const native = (engine as unknown as { graph: { model: Deepseek4Model } }).graph.model.weights.native!;
    const before = native.handleCount;
    expect(before).toBeGreaterThan(0);
    const seq = engine.createSequence();
    seq.prefill(tokens);
    seq.free();
    expect(native.handleCount).toBe(before);
  });

  it('prefill + decode equal the reference forward bit for bit; entries live in the pool pages', () => {
    const seq = engine.createSequence();
    const got = seq.prefill(tokens);
    const st = reference.newState();
    expect(same(got, reference.eval(st, tokens))).toBe(true);
    for (const t of [5, 17, 300]) expect(same(seq.decode(t), reference.step(st, t))).toBe(true);
    expect(seq.blockTable.length).toBe(Math.ceil(203 / 64));

    const graphState = (engine as unknown as { graph: Deepseek4Graph }).graph.stateOf(seq.id)!;
    const poolBuffer = (engine.backend as unknown as { pageView(p: unknown, i: number): Uint8Array }).pageView(engine.pool.handle, seq.blockTable[0]!).buffer;
    const c = reference.cfg;
    let paged = 0;
    for (let l = 0; l < c.nLayer; l++) {
      const ls = graphState.layers[l]!;
      expect(ls.entries.length).toBe(c.ratios[l] ? Math.floor(203 / c.ratios[l]!) : 0);
      for (const e of [...ls.entries, ...ls.idxKeys]) {
        expect(e.buffer).toBe(poolBuffer);
        paged++;
      }
      // same values as the reference state's
      ls.entries.forEach((e, k) => expect(same(e, st.layers[l]!.entries[k]!)).toBe(true));
    }
    expect(paged).toBeGreaterThan(100);
    const used = engine.pool.allocator.pages - engine.pool.freePages;
    seq.free();
    expect(engine.pool.allocator.pages - engine.pool.freePages).toBe(used - 4);
  }, 120_000);

  // a segment runs as one pass of mat-muls over its rows (deepseek4-forward.ts rows()): any split of the
  // prompt, next to any other sequence's rows, must give the one-pass logits bit for bit
  for (const chunk of [1, 7, 64, 128]) {
    it(`chunks of ${chunk}, batched with another sequence, equal one pass bit for bit`, () => {
      const whole = reference.eval(reference.newState(), tokens);
      const otherWhole = reference.eval(reference.newState(), other);
      const a = engine.createSequence();
      const b = engine.createSequence();
      let last: Float32Array | null = null;
      let otherLast: Float32Array | null = null;
      for (let i = 0; i < tokens.length; i += chunk) {
        const withOther = i < other.length;
        const out = engine.step([
          { seq: a, tokens: tokens.slice(i, i + chunk), logits: i + chunk >= tokens.length },
          ...(withOther ? [{ seq: b, tokens: other.slice(i, i + chunk), logits: i + chunk >= other.length }] : []),
        ]);
        if (i + chunk >= tokens.length) last = out[0]!;
        if (withOther && i + chunk >= other.length) otherLast = out[1]!;
      }
      expect(same(last!, whole)).toBe(true);
      expect(same(otherLast!, otherWhole)).toBe(true);
      a.free();
      b.free();
    }, 120_000);
  }

  it('says its state is not its pages, and refuses a sequence whose state does not match', () => {
    expect(engine.hasRecurrentState).toBe(true);
    const seq = engine.createSequence();
    seq.prefill(tokens.slice(0, 70));
    // further back than the last forward's rollback marks (its last 16 rows, deepseek4-marks.ts): refused
    seq.truncate(50);
    expect(() => seq.decode(3)).toThrow(/KVT_ERR_ENGINE_SEQUENCE_STATE|state is at 70/);
    seq.free();
    // within them (a rejected draft): rolled back exactly, the next logits as if the rows were never fed
    const rolled = engine.createSequence();
    rolled.prefill(tokens.slice(0, 70));
    rolled.truncate(65);
    const fresh = engine.createSequence();
    fresh.prefill(tokens.slice(0, 65));
    expect(same(rolled.decode(3), fresh.decode(3))).toBe(true);
    rolled.free();
    fresh.free();
  }, 60_000);
});
