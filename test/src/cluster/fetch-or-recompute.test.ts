import { describe, expect, it } from 'vitest';

import { FetchOrRecompute } from '../../../src/cluster/index.ts';

const BLOCK_BYTES = 1 << 20; // 1 MiB of KV per 64-token block
const BLOCK_TOKENS = 64;

describe('FetchOrRecompute', () => {
  it('loads while warming up, then follows the measured rates', () => {
    const estimator = new FetchOrRecompute({ minSamples: 2, alpha: 0.5 });
    expect(estimator.decide(4, BLOCK_BYTES, BLOCK_TOKENS)).toMatchObject({ loadBlocks: 4, reason: 'warming-up' });
    // Storage 100 MiB/s, prefill 1000 tokens/s: a block reads in 10 ms, computes in 64 ms.
    for (let i = 0; i < 2; i++) {
      estimator.observeLoad(10 * BLOCK_BYTES, 100);
      estimator.observePrefill(1000, 1000);
    }
    const fast = estimator.decide(4, BLOCK_BYTES, BLOCK_TOKENS);
    expect(fast).toMatchObject({ loadBlocks: 4, reason: 'read-faster' });
    expect(fast.predictedReadMs).toBeCloseTo(40, 6);
    expect(fast.predictedComputeMs).toBeCloseTo(256, 6);
  });

  it('recomputes when storage becomes slower than prefill, and recovers', () => {
    const estimator = new FetchOrRecompute({ minSamples: 1, alpha: 1 });
    estimator.observePrefill(64_000, 1000); // 64k tokens/s: a block computes in 1 ms
    estimator.observeLoad(BLOCK_BYTES, 50); // 20 MiB/s: a block reads in 50 ms
    const slow = estimator.decide(3, BLOCK_BYTES, BLOCK_TOKENS);
    expect(slow).toMatchObject({ loadBlocks: 0, reason: 'compute-faster' });
    expect(slow.predictedReadMs).toBeCloseTo(150, 6);
    expect(slow.predictedComputeMs).toBeCloseTo(3, 6);
    estimator.observeLoad(BLOCK_BYTES, 0.5); // 2 GiB/s
    expect(estimator.decide(3, BLOCK_BYTES, BLOCK_TOKENS)).toMatchObject({ loadBlocks: 3, reason: 'read-faster' });
  });

  it('averages samples exponentially and ignores empty ones', () => {
    const estimator = new FetchOrRecompute({ minSamples: 1, alpha: 0.5 });
    estimator.observeLoad(1000, 1000); // 1000 B/s
    estimator.observeLoad(3000, 1000); // 3000 B/s → mean 2000
    estimator.observeLoad(0, 10);
    estimator.observeLoad(100, 0);
    estimator.observePrefill(10, 1000);
    expect(estimator.decide(1, 1, 1).readBytesPerSec).toBe(2000);
    expect(estimator.decide(0, 1, 1)).toMatchObject({ loadBlocks: 0, reason: 'no-hits' });
  });

  it('rejects bad options with a typed error', () => {
    expect(() => new FetchOrRecompute({ alpha: 0 })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
    expect(() => new FetchOrRecompute({ minSamples: -1 })).toThrow(expect.objectContaining({ code: 'KVT_ERR_CLUSTER_BAD_OPTION' }));
  });
});
