/**
 * Codec quality, measured on the served model: the same prompt's first blocks
 * imported raw and imported through a codec (compress → decompress), the tail
 * prefilled, then 32 greedy steps teacher-forced on the raw run's tokens:
 *
 *   maxLogitDev / meanLogitDev   max and mean |logit − raw logit| over the vocabulary at the tail's
 *                                last position and each of the 32 steps
 *   relMaxLogitDev               maxLogitDev / the raw logits' standard deviation (scale-free: tiny
 *                                random models have logits of ~0.1, real ones of ~10)
 *   greedyAgree                  of the 32 free-running greedy tokens, how many equal the raw run's
 *   greedyNearTie                the first disagreement came where the raw run's top two logits were
 *                                within twice that step's max |Δlogit| (a flip the deviation explains)
 *
 * The engine is passed in structurally (inference-core is not imported here).
 * `assertCodecWithinBound` is what the policy routes call: a codec whose
 * measured relMaxLogitDev exceeds its bound is refused unless forced.
 */
import type { KvLayout } from '../kv-layout.ts';
import { CodecError } from './codec-errors.ts';
import { BLOCK_CODECS, compressPayload, decompressPayloadInto, type BlockCodecName } from './kv-codecs.ts';

export interface CodecProbeSequence {
  prefill(tokens: ArrayLike<number>): Float32Array;
  decode(token: number): Float32Array;
  exportBlocks(from: number, to: number): Uint8Array[];
  importBlocks(blocks: readonly Uint8Array[]): void;
  free(): void;
}

export interface CodecProbeEngine {
  readonly fingerprint: string;
  readonly vocabSize: number;
  readonly kvLayout: KvLayout;
  createSequence(): CodecProbeSequence;
}

export interface CodecQuality {
  codec: BlockCodecName;
  modelFingerprint: string;
  maxLogitDev: number;
  meanLogitDev: number;
  relMaxLogitDev: number;
  greedySteps: number;
  greedyAgree: number;
  greedyNearTie: boolean;
  /** Stored / raw payload bytes of the probe's blocks. */
  ratio: number;
}

export interface MeasureOptions {
  /** Full blocks imported; default 3. */
  blocks?: number;
  /** Tokens prefilled after them; default 16. */
  tailTokens?: number;
  /** Greedy steps; default 32. */
  greedySteps?: number;
  /** Prompt seed; default 1. */
  seed?: number;
}

/**
 * Stated bounds on relMaxLogitDev (max |Δlogit| / std of the raw logits) per
 * codec: the largest the policy accepts without `force`. Chosen from the
 * figures in bench/RESULTS.md "storage: block codecs" with headroom for other
 * models; none is exact (0).
 */
export const CODEC_REL_DEV_BOUND: Record<BlockCodecName, number> = { none: 0, int8: 0.1, fp8: 0.25, int4: 0.25 };

function promptTokens(n: number, vocab: number, seed: number): number[] {
  let s = seed >>> 0 || 1;
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    s = (Math.imul(s, 1664525) + 1013904223) >>> 0;
    out.push(s % vocab);
  }
  return out;
}

function argmax(a: Float32Array): number {
  let b = 0;
  for (let i = 1; i < a.length; i++) if (a[i] > a[b]) b = i;
  return b;
}

function topTwoMargin(a: Float32Array): number {
  let first = -Infinity;
  let second = -Infinity;
  for (const v of a) {
    if (v > first) [first, second] = [v, first];
    else if (v > second) second = v;
  }
  return first - second;
}

function std(a: Float32Array): number {
  let mean = 0;
  for (const v of a) mean += v;
  mean /= a.length;
  let sq = 0;
  for (const v of a) sq += (v - mean) ** 2;
  return Math.sqrt(sq / a.length);
}

/** The blocks as the tier would hand them to importBlocks after storing them under `codec`. */
export function throughCodec(codec: BlockCodecName, layout: KvLayout, blocks: readonly Uint8Array[]): { blocks: Uint8Array[]; storedBytes: number } {
  let storedBytes = 0;
  const out = blocks.map((raw) => {
    const stored = compressPayload(codec, layout, layout.tokensPerBlock, raw);
    if (stored === null) {
      storedBytes += raw.byteLength;
      return raw;
    }
    storedBytes += stored.byteLength;
    const back = new Uint8Array(raw.byteLength);
    decompressPayloadInto(back, codec, layout, layout.tokensPerBlock, stored);
    return back;
  });
  return { blocks: out, storedBytes };
}

/** Measures `codecs` (default all) on `engine`; runs 2 + 2·codecs sequences of blocks·64 + tail + greedy tokens. */
export function measureCodecQuality(engine: CodecProbeEngine, codecs: readonly BlockCodecName[] = BLOCK_CODECS, options: MeasureOptions = {}): CodecQuality[] {
  const kb = options.blocks ?? 3;
  const tail = options.tailTokens ?? 16;
  const steps = options.greedySteps ?? 32;
  const B = engine.kvLayout.tokensPerBlock;
  const prompt = promptTokens(kb * B + tail, engine.vocabSize, options.seed ?? 1);
  const run = <T>(fn: (seq: CodecProbeSequence) => T): T => {
    const seq = engine.createSequence();
    try {
      return fn(seq);
    } finally {
      seq.free();
    }
  };
  try {
    const raw = run((seq) => {
      seq.prefill(prompt.slice(0, kb * B));
      return seq.exportBlocks(0, kb);
    });
    // Raw run: logits at the tail's end and after each greedy token (free-running == teacher-forced here).
    const reference = run((seq) => {
      seq.importBlocks(raw);
      const logits = [seq.prefill(prompt.slice(kb * B)).slice()];
      const tokens: number[] = [];
      for (let i = 0; i < steps; i++) {
        tokens.push(argmax(logits[i]));
        if (i + 1 < steps) logits.push(seq.decode(tokens[i]).slice());
      }
      return { logits, tokens };
    });
    const scale = std(reference.logits[0]) || 1;
    return codecs.map((codec) => {
      const { blocks, storedBytes } = throughCodec(codec, engine.kvLayout, raw);
      let maxDev = 0;
      let sumDev = 0;
      let count = 0;
      const stepDev: number[] = [];
      run((seq) => {
        seq.importBlocks(blocks);
        let logits = seq.prefill(prompt.slice(kb * B));
        for (let i = 0; i < steps; i++) {
          const ref = reference.logits[i];
          let step = 0;
          for (let v = 0; v < ref.length; v++) {
            const d = Math.abs(logits[v] - ref[v]);
            if (d > step) step = d;
            sumDev += d;
          }
          stepDev.push(step);
          maxDev = Math.max(maxDev, step);
          count += ref.length;
          if (i + 1 < steps) logits = seq.decode(reference.tokens[i]);
        }
      });
      const free = run((seq) => {
        seq.importBlocks(blocks);
        let logits = seq.prefill(prompt.slice(kb * B));
        const tokens: number[] = [];
        for (let i = 0; i < steps; i++) {
          tokens.push(argmax(logits));
          if (i + 1 < steps) logits = seq.decode(tokens[i]);
        }
        return tokens;
      });
      let agree = 0;
      while (agree < steps && free[agree] === reference.tokens[agree]) agree++;
      const greedyNearTie = agree < steps && topTwoMargin(reference.logits[agree]) <= 2 * stepDev[agree];
      const rawBytes = raw.reduce((sum, b) => sum + b.byteLength, 0);
      return {
        codec,
        modelFingerprint: engine.fingerprint,
        maxLogitDev: maxDev,
        meanLogitDev: sumDev / count,
        relMaxLogitDev: maxDev / scale,
        greedySteps: steps,
        greedyAgree: agree,
        greedyNearTie,
        ratio: storedBytes / rawBytes,
      };
    });
  } catch (error) {
    throw new CodecError('KVT_ERR_CODEC_MEASURE', `measuring block codecs on model ${engine.fingerprint} failed: ${(error as Error).message}`, { cause: error });
  }
}

/**
 * Throws KVT_ERR_POLICY_CODEC_QUALITY when `quality` is beyond the codec's
 * bound (or KVT_ERR_POLICY_CODEC_UNMEASURED when there is no measurement),
 * unless `force`. The message names the codec, the figure and the bound.
 */
export function assertCodecWithinBound(codec: BlockCodecName, quality: CodecQuality | undefined, force: boolean, bounds: Record<BlockCodecName, number> = CODEC_REL_DEV_BOUND): void {
  if (codec === 'none' || force) return;
  if (quality === undefined) {
    throw new CodecError(
      'KVT_ERR_POLICY_CODEC_UNMEASURED',
      `codec ${codec} has not been measured on the served model (this process has no engine to measure it with); measure it where the engine runs, or send "force": true to accept it unmeasured`,
    );
  }
  if (quality.relMaxLogitDev > bounds[codec]) {
    throw new CodecError(
      'KVT_ERR_POLICY_CODEC_QUALITY',
      `codec ${codec} moves the served model's logits by up to ${quality.maxLogitDev.toPrecision(3)} (${quality.relMaxLogitDev.toPrecision(3)} of their standard deviation; bound ${bounds[codec]}), greedy agreement ${quality.greedyAgree}/${quality.greedySteps}; pick a milder codec or send "force": true to accept it`,
    );
  }
}
