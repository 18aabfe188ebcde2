/**
 * The shared xoshiro128** step (inference-core/xoshiro128.ts):
 *  - both users' streams are the ones they had before the step was shared
 *    (known answers taken from ba1a82c's two copies): seeded replies and
 *    synthetic model fingerprints depend on them;
 *  - a step allocates nothing: filling millions of synthetic weights runs
 *    without garbage collections. Its state once left int32 (uint32 words ≥ 2^31
 *    are heap doubles in V8), each step allocated and every process that
 *    generated synthetic:small started ~2 s later (issue #28, bench/RESULTS.md).
 *    Counted in GCs, not in time: the law is "no per-draw garbage".
 */
import { PerformanceObserver } from 'node:perf_hooks';

import { describe, expect, it } from 'vitest';

import { Prng } from '../../inference-core/sampling/index.ts';
import { Xoshiro128 } from '../../inference-core/synthetic/prng.ts';

describe('xoshiro128**', () => {
  it('the synthetic weights generator repeats its known stream', () => {
    const g = new Xoshiro128(0x2545f491);
    expect(Array.from({ length: 6 }, () => g.nextU32())).toEqual([3747575237, 2002201300, 2807852166, 1423288238, 1313437992, 991682014]);
    const long = new Xoshiro128(7);
    let last = 0;
    for (let i = 0; i < 1_000_000; i++) last = long.nextU32();
    expect(last).toBe(2425681434);
  });

  it("the sampler's Prng repeats its known stream", () => {
    const p = new Prng(42);
    expect(Array.from({ length: 6 }, () => p.nextU32())).toEqual([2837322924, 544945897, 479756282, 3500138142, 339756180, 113173290]);
    const zero = new Prng(0);
    expect(Array.from({ length: 3 }, () => zero.nextU32())).toEqual([3809008728, 1133695204, 53579671]);
  });

  it('every result is a uint32', () => {
    const g = new Xoshiro128(3);
    for (let i = 0; i < 100_000; i++) {
      const u = g.nextU32();
      if (!(Number.isInteger(u) && u >= 0 && u < 2 ** 32)) expect.fail(`draw ${i}: ${u}`);
    }
  });

  it('filling 13 M normals makes no per-draw garbage (a handful of GCs at most, not hundreds)', async () => {
    let gcs = 0;
    const observer = new PerformanceObserver((list) => (gcs += list.getEntries().length));
    observer.observe({ entryTypes: ['gc'] });
    try {
      const out = new Float32Array(1 << 16);
      const g = new Xoshiro128(11);
      for (let k = 0; k < 200; k++) g.fillNormal(out, 0, 1);
      // GC entries are queued to the observer from the event loop: let it turn.
      await new Promise((resolve) => setImmediate(resolve));
      await new Promise((resolve) => setImmediate(resolve));
      gcs += observer.takeRecords().length;
    } finally {
      observer.disconnect();
    }
    // With a boxed state this loop ran 130 scavenges here; without, 0–1.
    expect(gcs).toBeLessThan(25);
  });
});
