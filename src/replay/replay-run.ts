/**
 * The replay loop: each request of a trace, in arrival order, through a
 * target (the real tier), at the trace's own timing (`speed` 1), faster
 * (`speed` N) or as fast as it goes (`speed` 0: time compressed, the
 * target's clock jumps to each arrival). Beside it the ideal (an infinite
 * cache, same block rule) is computed, and per class and per hour the hit
 * tokens, requests and tokens are tallied. Stored bytes are sampled once per
 * trace minute, after the target expired what its policy expires.
 */
import { IdealCache } from './ideal.ts';
import { BlockTokenBuffer } from './synth-tokens.ts';
import type { ReplayRequest, Trace } from './trace.ts';

export interface ReplayTarget {
  /** Synthesised tokens stay below this (a served model's vocabulary); absent = any 31-bit id. */
  readonly vocab?: number;
  setTime(atMs: number): void;
  /** Waits for the writes queued so far. */
  settle(): Promise<void>;
  /** Whether enough writes are queued that the loop should wait before the next request (bounds memory, never drops a write). */
  backlogged(): boolean;
  /** Waits until the backlog is below its bound again; absent = `settle`. */
  relieve?(): Promise<void>;
  /** `tokens` is the replay's buffer, rewritten for the next request: valid until the returned promise settles (copy what is kept). */
  serve(request: ReplayRequest, tokens: Uint32Array): Promise<number>;
  stored(): Promise<{ bytes: number; blocks: number }>;
}

export interface Tally {
  requests: number;
  inputTokens: number;
  outputTokens: number;
  /** Tokens of the cacheable (full) blocks. */
  cacheableTokens: number;
  hitTokens: number;
  idealHitTokens: number;
}

export interface ReplayOutcome {
  total: Tally;
  byClass: Record<string, Tally>;
  /** Index = trace hour. */
  byHour: Tally[];
  /** Hit blocks of each request, in replay order (tests compare them with the definition). */
  hitBlocks: Uint32Array;
  stored: { peakBytes: number; avgBytes: number; peakBlocks: number; samples: number };
  wallMs: number;
}

export interface ReplayRunOptions {
  /** 0 = as fast as possible (time compressed); 1 = the trace's timing; N = N times faster. */
  speed?: number;
  /** Stored bytes are sampled every this many trace ms. Default 60 s; 0 = only at the end. */
  sampleEveryMs?: number;
  onProgress?: (done: number, total: number) => void;
  /** After each request: its hit blocks (the command feeds the stats store with it). */
  onServed?: (request: ReplayRequest, hitBlocks: number) => void;
  /** For a real-time replay (tests inject one). */
  sleep?: (ms: number) => Promise<void>;
  now?: () => number;
}

export function emptyTally(): Tally {
  return { requests: 0, inputTokens: 0, outputTokens: 0, cacheableTokens: 0, hitTokens: 0, idealHitTokens: 0 };
}

function add(tally: Tally, request: ReplayRequest, blockTokens: number, hit: number, ideal: number): void {
  tally.requests++;
  tally.inputTokens += request.inputTokens;
  tally.outputTokens += request.outputTokens;
  tally.cacheableTokens += request.blocks.length * blockTokens;
  tally.hitTokens += hit * blockTokens;
  tally.idealHitTokens += ideal * blockTokens;
}

export async function runReplay(trace: Trace, target: ReplayTarget, options: ReplayRunOptions = {}): Promise<ReplayOutcome> {
  const speed = options.speed ?? 0;
  const sampleEvery = options.sampleEveryMs ?? 60_000;
  const now = options.now ?? (() => performance.now());
  const sleep = options.sleep ?? ((ms: number) => new Promise<void>((resolve) => setTimeout(resolve, ms)));
  const { requests, blockTokens } = trace;
  const ideal = new IdealCache();
  const total = emptyTally();
  const byClass: Record<string, Tally> = {};
  const byHour: Tally[] = [];
  const hitBlocks = new Uint32Array(requests.length);
  const synth = new BlockTokenBuffer(blockTokens, target.vocab);
  const origin = requests[0].atMs;
  let peakBytes = 0;
  let peakBlocks = 0;
  let sumBytes = 0;
  let samples = 0;
  const sample = async () => {
    const stored = await target.stored();
    peakBytes = Math.max(peakBytes, stored.bytes);
    peakBlocks = Math.max(peakBlocks, stored.blocks);
    sumBytes += stored.bytes;
    samples++;
  };
  let nextSample = origin + sampleEvery;
  let currentAt = Number.NaN;
  const started = now();
  for (let r = 0; r < requests.length; r++) {
    const request = requests[r];
    // Bounds the writes in flight (each block keeps its request's time as its last use, or a later hit's, whenever it lands).
    if (target.backlogged()) await (target.relieve?.() ?? target.settle());
    if (request.atMs !== currentAt) {
      while (sampleEvery > 0 && request.atMs >= nextSample) {
        target.setTime(nextSample - origin);
        await sample();
        nextSample += sampleEvery;
      }
      if (speed > 0) {
        const due = (request.atMs - origin) / speed - (now() - started);
        if (due > 0) await sleep(due);
      }
      target.setTime(request.atMs - origin);
      currentAt = request.atMs;
    }
    const tokens = synth.tokensFor(request.blocks);
    const hit = await target.serve(request, tokens);
    const idealHit = ideal.serve(request);
    hitBlocks[r] = hit;
    add(total, request, blockTokens, hit, idealHit);
    add((byClass[request.trafficClass] ??= emptyTally()), request, blockTokens, hit, idealHit);
    const hour = Math.floor((request.atMs - origin) / 3_600_000);
    while (byHour.length <= hour) byHour.push(emptyTally());
    add(byHour[hour], request, blockTokens, hit, idealHit);
    options.onServed?.(request, hit);
    options.onProgress?.(r + 1, requests.length);
  }
  await target.settle();
  const wallMs = now() - started;
  await sample();
  return { total, byClass, byHour, hitBlocks, stored: { peakBytes, avgBytes: samples > 0 ? sumBytes / samples : 0, peakBlocks, samples }, wallMs };
}
