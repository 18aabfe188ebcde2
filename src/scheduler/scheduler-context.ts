/**
 * What the scheduler's phase modules share: the options it was built with
 * and the state of the loop (prefill-scheduler.ts owns it; the modules read
 * it and call back through `finish` / `fail` / `kick`).
 */
import type { FetchOrRecompute } from '../cluster/index.ts';
import type { JobEvent, RequestSpec } from './job.ts';
import type { JobEnds } from './job-ends.ts';
import type { CacheTier, EngineModel, EngineSequence, SpeculativeDecoder, TokenSampler } from './ports.ts';
import type { RetainedSequences } from './retained-sequences.ts';
import type { RequestSequence } from './sequence.ts';
import type { ComputingBlocks } from './single-flight.ts';

export interface SchedulerOptions {
  engine: EngineModel;
  cache: CacheTier | null;
  blockTokens: number;
  maxBatch: number;
  emit: (jobId: string, event: JobEvent) => void;
  createSampler: (job: RequestSpec) => TokenSampler;
  /**
   * Speculative decoding for a job whose first token is sampled: `context` is
   * the prompt and that token, the sequence's KV holds all but the last.
   * Null (or absent): plain decoding.
   */
  createSpeculative?: (job: RequestSpec, sequence: EngineSequence, context: ArrayLike<number>) => SpeculativeDecoder | null;
  /**
   * Plans the speculative decoders of one step together (e.g. their draft-model
   * steps batched in one draft forward per position); result i is
   * `batch[i].decoder.plan(batch[i].limit)`. Absent: each plans alone.
   */
  planSpeculative?: (batch: readonly { decoder: SpeculativeDecoder; limit: number }[]) => { tokens: number[] }[];
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  /** Tokens one step carries (decode rows + prefill chunks); default 128, at most the engine's step size. */
  stepTokens?: number;
  /** Finished sequences kept in the pool for the next turn (default 16; 0 = free at once). */
  retainSequences?: number;
  /** Load a hit only when reading it is predicted to beat recomputing it (absent: always load). */
  fetchPolicy?: FetchOrRecompute;
  now?: () => number;
}

export type FinishReason = 'stop' | 'length' | 'cancelled';

export interface SchedulerContext {
  readonly options: SchedulerOptions;
  readonly now: () => number;
  /** Admitted and unfinished, in admission order. */
  readonly active: RequestSequence[];
  readonly retained: RetainedSequences;
  /** Prompt blocks an admitted request is computing (single flight). */
  readonly computing: ComputingBlocks;
  readonly ends: JobEnds;
  /** Lookups/loads and stores in flight, so the loop gives I/O a moment and close() waits for write-behind. */
  readonly pendingFetches: Set<Promise<unknown>>;
  readonly pendingStores: Set<Promise<unknown>>;
  readonly closed: boolean;
  /** Engine forwards run so far. */
  readonly steps: number;
  kick(): void;
  /** The prompt is in the KV: report it, then sample the first token (or, prefill-only, finish once stored). */
  promptDone(seq: RequestSequence, logits: Float32Array | null): void;
  finish(seq: RequestSequence, reason: FinishReason): void;
  fail(seq: RequestSequence, error: unknown): void;
}

/** `code: message` of a storage fault, for the prefilled event. */
export function describeError(error: unknown): string {
  if (error instanceof Error) {
    const code = (error as { code?: unknown }).code;
    return typeof code === 'string' ? `${code}: ${error.message}` : error.message;
  }
  return String(error);
}
