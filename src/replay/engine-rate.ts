/**
 * `kvtier replay --engine MODEL`: the engine's prefill rate, measured by
 * running the model for real on a small sample of the trace's requests
 * (their synthesised tokens, below the model's vocabulary, cut to its
 * context), so GPU-seconds saved are hit tokens at a measured rate rather
 * than an assumed one. The rest of the replay still simulates prefill.
 *
 * The engine is passed in (the command loads it from inference-core), so
 * this folder needs only its shape: a sequence that prefills tokens.
 */
import { tokensForBlocks } from './synth-tokens.ts';
import type { Trace } from './trace.ts';

export interface PrefillEngine {
  readonly vocabSize: number;
  readonly contextLength: number;
  createSequence(): { prefill(tokens: number[]): unknown; free(): void };
}

export interface PrefillRate {
  tokensPerS: number;
  /** Requests prefilled (the sample) and their tokens. */
  requests: number;
  tokens: number;
  seconds: number;
  /** Whether any sampled prompt was cut to the model's context. */
  truncated: boolean;
}

export interface PrefillRateOptions {
  /** Requests to run (spread evenly over the trace). Default 8. */
  sample?: number;
  now?: () => number;
}

/** Prefills `sample` requests of `trace`, one fresh sequence each, after one short warm-up; tokens over wall seconds. */
export function measurePrefillRate(engine: PrefillEngine, trace: Trace, options: PrefillRateOptions = {}): PrefillRate {
  const now = options.now ?? (() => performance.now());
  const withBlocks = trace.requests.filter((r) => r.blocks.length > 0);
  if (withBlocks.length === 0) throw new RangeError('the trace has no request with a full block to prefill');
  const sample = Math.min(options.sample ?? 8, withBlocks.length);
  // Room for one generated token, as a server would leave.
  const limit = engine.contextLength - 1;
  let truncated = false;
  const prompts: number[][] = [];
  for (let i = 0; i < sample; i++) {
    const request = withBlocks[Math.floor((i * withBlocks.length) / sample)];
    const tokens = Array.from(tokensForBlocks(request.blocks, trace.blockTokens, engine.vocabSize));
    if (tokens.length > limit) truncated = true;
    prompts.push(tokens.slice(0, limit));
  }
  // The first forward pays one-time costs (weights paged in, buffers sized) a serving engine has paid long ago.
  const warm = engine.createSequence();
  try {
    warm.prefill(prompts[0].slice(0, Math.min(prompts[0].length, 64)));
  } finally {
    warm.free();
  }
  let tokens = 0;
  let ms = 0;
  for (const prompt of prompts) {
    const sequence = engine.createSequence();
    try {
      const started = now();
      sequence.prefill(prompt);
      ms += now() - started;
      tokens += prompt.length;
    } finally {
      sequence.free();
    }
  }
  const seconds = ms / 1000;
  return { tokensPerS: seconds > 0 ? tokens / seconds : 0, requests: prompts.length, tokens, seconds, truncated };
}
