/**
 * Token sampler: greedy, or temperature → top-k → top-p → draw from a seeded
 * PRNG, with optional repetition penalty and stop tokens.
 *
 * Order of the pipeline (the one llama.cpp and HF transformers use):
 *
 *   logits ─► logit bias, presence / frequency penalties (logit-adjust.ts)
 *          ─► repetition penalty (over the last `repeatLastN` tokens)
 *          ─► temperature 0 ? argmax (first index wins ties)
 *          ─► ÷ temperature ─► top-k ─► softmax ─► top-p (nucleus) ─► draw
 *
 * Temperature > 0 draws through the native sampleMasked (native/src/ops/sample-masked.h):
 * softmax weights exp((x − max)/T) as integers (2^-40 of the largest), the
 * top-k / top-p cut found without sorting the vocabulary, then one draw over
 * the kept ids in id order — P(id) = its weight / the kept total, exactly.
 * A plain twin (sampleMaskedRef, a full sort) gives the same token bit for bit.
 *
 * Determinism: the same seed, logits and history give the same token on
 * every machine (xoshiro128** in 32-bit integer arithmetic, no Math.random;
 * a draw takes two 32-bit words as one 64-bit uniform; the native draw is
 * integer arithmetic on weights that are the same on every ISA).
 */
import { nativeAddon, type NativeAddon } from '../../native/index.ts';
import { EngineError } from '../engine/engine-errors.ts';
import { LogitAdjuster, type LogitAdjustOptions } from './logit-adjust.ts';
import { splitmix32Words, Xoshiro128Core } from '../xoshiro128.ts';

export interface SamplingOptions extends LogitAdjustOptions {
  /** 0 (default) = greedy. */
  temperature?: number;
  /** Keep the k most likely tokens (0 or undefined = all). */
  topK?: number;
  /** Keep the smallest set whose probability reaches p (1 or undefined = all). */
  topP?: number;
  /** PRNG seed (default 0). */
  seed?: number;
  /** Token ids that end generation (e.g. EOS, EOT). */
  stopTokens?: readonly number[];
  /** > 1 discourages tokens seen in the last `repeatLastN` tokens (default 1 = off). */
  repetitionPenalty?: number;
  /** Window of the repetition penalty (default 64). */
  repeatLastN?: number;
}

const F32_MAX = 3.4028234663852886e38;

/** xoshiro128** (../xoshiro128.ts) seeded by splitmix32; uniform floats in [0, 1). */
export class Prng extends Xoshiro128Core {
  constructor(seed: number) {
    const words = splitmix32Words(seed);
    if ((words[0] | words[1] | words[2] | words[3]) === 0) words[0] = 1;
    super(words);
  }

  /** Uniform in [0, 1) with 32 bits of resolution. */
  nextFloat(): number {
    return this.nextU32() / 4294967296;
  }
}

/** Index of the largest value; the first one wins ties (as llama.cpp's greedy sampler). */
export function argmax(logits: Float32Array): number {
  let best = 0;
  let bestValue = logits[0];
  for (let i = 1; i < logits.length; i++) {
    if (logits[i] > bestValue) {
      bestValue = logits[i];
      best = i;
    }
  }
  return best;
}

/** Calls `visit` with each id below `limit` that the mask allows (bit j of word w is id 32w + j), in ascending order. */
export function forEachAllowedId(mask: Uint32Array, limit: number, visit: (id: number) => void): void {
  for (let w = 0; w < mask.length; w++) {
    let bits = mask[w];
    while (bits !== 0) {
      const low = bits & -bits;
      const id = (w << 5) + (31 - Math.clz32(low));
      bits ^= low;
      if (id < limit) visit(id);
    }
  }
}

/** Greedy under a mask: the first maximum in id order is the lowest allowed id among the largest (argmax's tie rule). */
export function maskedArgmax(x: Float32Array, mask: Uint32Array): number {
  let best = -1;
  forEachAllowedId(mask, x.length, (id) => {
    if (best < 0 || x[id] > x[best]) best = id;
  });
  if (best < 0) throw noTokenAllowed();
  return best;
}

/** A mask allowing nothing is a caller's bug (the grammar throws its dead end first). */
export function noTokenAllowed(): EngineError {
  return new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'the token mask allows no token; nothing can be sampled');
}

function checkOptions(o: SamplingOptions): void {
  const bad = (what: string): never => {
    throw new EngineError('KVT_ERR_ENGINE_SAMPLING_OPTIONS', `${what}; fix the sampling options of the request`);
  };
  const t = o.temperature ?? 0;
  if (!Number.isFinite(t) || t < 0) bad(`temperature must be a finite number ≥ 0, got ${o.temperature}`);
  if (o.topK !== undefined && (!Number.isInteger(o.topK) || o.topK < 0)) bad(`topK must be an integer ≥ 0, got ${o.topK}`);
  if (o.topP !== undefined && (!Number.isFinite(o.topP) || o.topP <= 0 || o.topP > 1)) bad(`topP must be in (0, 1], got ${o.topP}`);
  if (o.seed !== undefined && !Number.isInteger(o.seed)) bad(`seed must be an integer, got ${o.seed}`);
  const rp = o.repetitionPenalty ?? 1;
  if (!Number.isFinite(rp) || rp <= 0) bad(`repetitionPenalty must be > 0, got ${o.repetitionPenalty}`);
  const n = o.repeatLastN ?? 64;
  if (!Number.isInteger(n) || n < 0) bad(`repeatLastN must be an integer ≥ 0, got ${o.repeatLastN}`);
  for (const s of o.stopTokens ?? []) if (!Number.isInteger(s) || s < 0) bad(`stop token ids must be integers ≥ 0, got ${s}`);
}

/**
 * One sampler per generation (it owns the PRNG stream and the recent-token
 * window). Not shared between sequences.
 */
export class Sampler {
  readonly temperature: number;
  readonly topK: number;
  readonly topP: number;
  readonly repetitionPenalty: number;
  readonly repeatLastN: number;
  private readonly stop: ReadonlySet<number>;
  private readonly prng: Prng;
  private readonly recent: number[] = [];
  private readonly adjust: LogitAdjuster;
  // Scratch reused across calls (vocab-sized), so a decode step allocates nothing.
  private scratch: Float32Array | null = null;
  private wideMask: Uint32Array | null = null;
  private addon: NativeAddon | null = null;

  constructor(options: SamplingOptions = {}) {
    checkOptions(options);
    this.temperature = options.temperature ?? 0;
    this.topK = options.topK ?? 0;
    this.topP = options.topP ?? 1;
    this.repetitionPenalty = options.repetitionPenalty ?? 1;
    this.repeatLastN = options.repeatLastN ?? 64;
    this.stop = new Set(options.stopTokens ?? []);
    this.prng = new Prng(options.seed ?? 0);
    this.adjust = new LogitAdjuster(options);
  }

  /** True when the request changes logits beyond temperature / top-k / top-p (logit bias, presence or frequency penalty). */
  get adjustsLogits(): boolean {
    return this.adjust.configured;
  }

  isStop(token: number): boolean {
    return this.stop.has(token);
  }

  /** Records a token of the context (prompt or generated) for the repetition penalty. */
  accept(token: number): void {
    if (this.repeatLastN === 0 || this.repetitionPenalty === 1) return;
    this.recent.push(token);
    if (this.recent.length > this.repeatLastN) this.recent.shift();
  }

  /**
   * Picks the next token from `logits` (not modified) and records it. With
   * `allowed` (a bitset over token ids, e.g. a grammar's mask) only those
   * tokens are candidates: the mask applies before repetition penalty,
   * temperature, top-k and top-p, as if every other logit were -Infinity.
   */
  sample(logits: Float32Array, allowed?: Uint32Array): number {
    const token = this.pick(logits, allowed);
    this.adjust.noteGenerated(token);
    this.accept(token);
    return token;
  }

  private pick(logits: Float32Array, allowed?: Uint32Array): number {
    const vocab = logits.length;
    if (vocab === 0) throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', 'cannot sample from empty logits');
    if (allowed) return this.pickMasked(logits, allowed);
    const x = this.penalized(logits);
    if (this.temperature === 0) return argmax(x);
    return this.draw(x, null);
  }

  /** The native draw (see the file comment); `allowed` null: every id. */
  private draw(x: Float32Array, allowed: Uint32Array | null): number {
    const addon = (this.addon ??= nativeAddon());
    const hi = this.prng.nextU32();
    const lo = this.prng.nextU32();
    // 1/T past the f32 range (a temperature near 0) is the same law at f32's largest value: only the maxima keep weight.
    const invT = Math.min(1 / this.temperature, F32_MAX);
    const token = addon.sampleMasked(x, allowed, invT, this.topK, this.topP, hi, lo);
    if (token < 0) throw noTokenAllowed();
    return token;
  }

  /** `pick` over the allowed ids only (same pipeline, same tie rules). */
  private pickMasked(logits: Float32Array, allowed: Uint32Array): number {
    const vocab = logits.length;
    const words = (vocab + 31) >>> 5;
    if (allowed.length < words) {
      // A shorter mask allows nothing past its end: widen it with zeros (the native draw reads ceil(vocab/32) words).
      if (!this.wideMask || this.wideMask.length !== words) this.wideMask = new Uint32Array(words);
      this.wideMask.fill(0);
      this.wideMask.set(allowed);
      allowed = this.wideMask;
    }
    const x = this.penalized(logits);
    return this.temperature > 0 ? this.draw(x, allowed) : maskedArgmax(x, allowed);
  }

  /** `logits`, or a scratch copy with the request's adjustments (logit-adjust.ts) and the repetition penalty applied (llama.cpp's rule: shrink positive logits, push negative ones further down). */
  private penalized(logits: Float32Array): Float32Array {
    const repeat = this.repetitionPenalty !== 1 && this.recent.length > 0;
    if (!repeat && this.adjust.idle) return logits;
    const vocab = logits.length;
    if (!this.scratch || this.scratch.length !== vocab) this.scratch = new Float32Array(vocab);
    const x = this.scratch;
    x.set(logits);
    this.adjust.apply(x);
    if (repeat) for (const t of new Set(this.recent)) {
      if (t < vocab) x[t] = x[t] > 0 ? x[t] / this.repetitionPenalty : x[t] * this.repetitionPenalty;
    }
    return x;
  }
}
