/**
 * Cache equivalence: a prompt of 64·k + r tokens prefilled whole, versus the
 * first k blocks exported from another sequence, imported into a fresh one
 * and only the r-token tail prefilled. The logits must be bit-identical and
 * the 64-token greedy continuations the same: a cache hit changes the cost,
 * never the answer.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { greedyFrom, randomTokens, tinyEngine } from './engine-fixtures.ts';

describe.each([
  { weightType: 'f16' as const, kvDtype: 'f16' as const },
  { weightType: 'q8_0' as const, kvDtype: 'f32' as const },
])('cache equivalence ($weightType weights, $kvDtype KV)', ({ weightType, kvDtype }) => {
  let engine: LoadedEngine;
  beforeAll(async () => {
    engine = await tinyEngine({ weightType, kvDtype, poolBytes: 16 * 2 ** 20 });
  });
  afterAll(() => engine?.destroy());

  it.each([
    [1, 1],
    [1, 37],
    [3, 5],
    [8, 63],
  ])('k=%i blocks + r=%i tokens: bit-identical logits and greedy continuation', (k, r) => {
    const prompt = randomTokens(64 * k + r, engine.vocabSize, 1000 * k + r);

    const whole = engine.createSequence();
    const wholeLogits = whole.prefill(prompt);
    const wholeGreedy = greedyFrom(whole, wholeLogits, 64);

    // The exporter prefills a different total length (prefix only, then more), so its
    // chunking differs from `whole`'s; the blocks must not care.
    const exporter = engine.createSequence();
    exporter.prefill(prompt.slice(0, 64 * k));
    exporter.decode(3);
    const blocks = exporter.exportBlocks(0, k);
    exporter.free();

    const hit = engine.createSequence();
    hit.importBlocks(blocks);
    expect(hit.length).toBe(64 * k);
    const hitLogits = hit.prefill(prompt.slice(64 * k));
    expect(Buffer.from(hitLogits.buffer).equals(Buffer.from(wholeLogits.buffer))).toBe(true);
    expect(greedyFrom(hit, hitLogits, 64)).toEqual(wholeGreedy);

    // Exported blocks of the hit sequence equal those of the whole one, byte for byte.
    const a = whole.exportBlocks(0, k);
    const b = hit.exportBlocks(0, k);
    for (let i = 0; i < k; i++) expect(Buffer.from(a[i]).equals(Buffer.from(b[i]))).toBe(true);
    whole.free();
    hit.free();
  });
});
