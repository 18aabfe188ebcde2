/**
 * Fetch or recompute: per request, load a cached block only when reading it
 * is predicted to be faster than prefilling its tokens.
 *
 *   read time of a block     = blockBytes / readRate          (bytes/s of loads, measured)
 *   compute time of a block  = blockTokens / prefillRate      (tokens/s of prefill, measured)
 *
 * Both rates are exponentially weighted means (weight `alpha` for the newest
 * sample) of what this node observed. Until both rates have `minSamples`
 * observations the estimator says "load" (the design default: a hit should
 * cost storage-read time).
 *
 * The decision is per prefix, not per block: blocks are chained, so only a
 * leading run of hits can be used. Loading k blocks costs k·read; the rest
 * (hits − k blocks) are recomputed. Both costs are linear in k, so the best
 * plan is all or nothing: load every hit when read < compute, else none.
 */
import { ClusterError } from './errors.ts';

export interface FetchOrRecomputeOptions {
  /** Weight of the newest sample's unit, 0 < alpha ≤ 1. Default 0.2. */
  alpha?: number;
  /** Observations of each rate before it is trusted. Default 3. */
  minSamples?: number;
}

export interface FetchDecision {
  /** Leading hit blocks to load; the rest of the prompt is prefilled. */
  loadBlocks: number;
  reason: 'no-hits' | 'warming-up' | 'read-faster' | 'compute-faster';
  /** Predicted ms to read the hits, and to compute them instead (NaN while warming up). */
  predictedReadMs: number;
  predictedComputeMs: number;
  readBytesPerSec: number;
  prefillTokensPerSec: number;
}

class RateEstimate {
  private rate = Number.NaN;
  samples = 0;

  constructor(private readonly alpha: number) {}

  /** `amount` units done in `seconds`. */
  observe(amount: number, seconds: number): void {
    if (!(amount > 0) || !(seconds > 0) || !Number.isFinite(amount) || !Number.isFinite(seconds)) return;
    const sample = amount / seconds;
    this.samples++;
    if (Number.isNaN(this.rate)) {
      this.rate = sample;
      return;
    }
    this.rate += this.alpha * (sample - this.rate);
  }

  get value(): number {
    return this.rate;
  }
}

export class FetchOrRecompute {
  private readonly read: RateEstimate;
  private readonly prefill: RateEstimate;
  private readonly minSamples: number;

  constructor(options: FetchOrRecomputeOptions = {}) {
    const alpha = options.alpha ?? 0.2;
    if (!(alpha > 0 && alpha <= 1)) throw new ClusterError('BAD_OPTION', `alpha must be in (0, 1], got ${alpha}`, { param: 'alpha' });
    this.minSamples = options.minSamples ?? 3;
    if (!Number.isInteger(this.minSamples) || this.minSamples < 0) throw new ClusterError('BAD_OPTION', `minSamples must be a whole number ≥ 0, got ${options.minSamples}`, { param: 'minSamples' });
    this.read = new RateEstimate(alpha);
    this.prefill = new RateEstimate(alpha);
  }

  /** A load of `bytes` from the tier took `ms`. */
  observeLoad(bytes: number, ms: number): void {
    this.read.observe(bytes, ms / 1000);
  }

  /** Prefilling `tokens` took `ms`. */
  observePrefill(tokens: number, ms: number): void {
    this.prefill.observe(tokens, ms / 1000);
  }

  decide(hitBlocks: number, blockBytes: number, blockTokens: number): FetchDecision {
    const readBytesPerSec = this.read.value;
    const prefillTokensPerSec = this.prefill.value;
    const base = { readBytesPerSec, prefillTokensPerSec };
    if (hitBlocks <= 0) return { loadBlocks: 0, reason: 'no-hits', predictedReadMs: 0, predictedComputeMs: 0, ...base };
    const predictedReadMs = ((hitBlocks * blockBytes) / readBytesPerSec) * 1000;
    const predictedComputeMs = ((hitBlocks * blockTokens) / prefillTokensPerSec) * 1000;
    if (this.read.samples < this.minSamples || this.prefill.samples < this.minSamples) {
      return { loadBlocks: hitBlocks, reason: 'warming-up', predictedReadMs, predictedComputeMs, ...base };
    }
    return predictedReadMs <= predictedComputeMs
      ? { loadBlocks: hitBlocks, reason: 'read-faster', predictedReadMs, predictedComputeMs, ...base }
      : { loadBlocks: 0, reason: 'compute-faster', predictedReadMs, predictedComputeMs, ...base };
  }
}
