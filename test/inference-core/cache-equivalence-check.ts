/** The cache-equivalence check the engine tests share (cache-equivalence, arch-parity, deepseek-parity): a cache hit changes the cost, never the answer. */
import { expect, it } from 'vitest';

import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { greedyFrom, randomTokens } from './engine-fixtures.ts';

/**
 * A random prompt of 64·kb + r tokens (seed `seed`) prefilled whole, versus
 * its first kb blocks exported from another sequence (which prefilled a
 * different length, then decoded: its chunking differs, the blocks must not
 * care), imported into a fresh one, and only the r-token tail prefilled: the
 * logits, `greedy` greedy tokens and the blocks are equal, bit for bit.
 */
export function expectCacheEquivalence(engine: LoadedEngine, kb: number, r: number, seed: number, greedy: number): void {
  const prompt = randomTokens(64 * kb + r, engine.vocabSize, seed);
  const whole = engine.createSequence();
  const wholeLogits = whole.prefill(prompt);
  const wholeGreedy = greedyFrom(whole, wholeLogits, greedy);
  const exporter = engine.createSequence();
  exporter.prefill(prompt.slice(0, 64 * kb));
  exporter.decode(3);
  const blocks = exporter.exportBlocks(0, kb);
  exporter.free();
  for (const b of blocks) expect(b.byteLength).toBe(engine.kvLayout.blockBytes);
  const hit = engine.createSequence();
  hit.importBlocks(blocks);
  expect(hit.length).toBe(64 * kb);
  const hitLogits = hit.prefill(prompt.slice(64 * kb));
  expect(Buffer.from(hitLogits.buffer).equals(Buffer.from(wholeLogits.buffer))).toBe(true);
  expect(greedyFrom(hit, hitLogits, greedy)).toEqual(wholeGreedy);
  const a = whole.exportBlocks(0, kb);
  const b = hit.exportBlocks(0, kb);
  for (let i = 0; i < kb; i++) expect(Buffer.from(a[i]).equals(Buffer.from(b[i]))).toBe(true);
  whole.free();
  hit.free();
}

/** The parity suites' two cases on a model: 1 block + 37 tokens and 2 blocks + 5 (`unit` names what a block holds). */
export function itKeepsCacheEquivalence(engine: () => LoadedEngine, unit = 'blocks'): void {
  it.each([
    [1, 37],
    [2, 5],
  ])(`cache equivalence: k=%i ${unit} imported + r=%i tokens prefilled == whole prompt, bit for bit`, (kb, r) => {
    expectCacheEquivalence(engine(), kb, r, 7000 + 100 * kb + r, 16);
  });
}
