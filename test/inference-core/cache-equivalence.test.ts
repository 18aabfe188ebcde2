/**
 * Cache equivalence: a prompt of 64·k + r tokens prefilled whole, versus the
 * first k blocks exported from another sequence, imported into a fresh one
 * and only the r-token tail prefilled. The logits must be bit-identical and
 * the 64-token greedy continuations the same: a cache hit changes the cost,
 * never the answer.
 */
import { afterAll, beforeAll, describe, it } from 'vitest';
import type { LoadedEngine } from '../../inference-core/engine/index.ts';
import { expectCacheEquivalence } from './cache-equivalence-check.ts';
import { tinyEngine } from './engine-fixtures.ts';

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
    expectCacheEquivalence(engine, k, r, 1000 * k + r, 64);
  });
});
