/**
 * What the loop (prefill-scheduler.ts) and postprocess.ts share, as data:
 * the loop's state postprocess reads and changes, the events that come back
 * from I/O, and the I/O postprocess asks the loop to start.
 */
import type { JobEnds } from './job-ends.ts';
import type { JobEvent } from './job.ts';
import type { CacheTier, DecoderFactory, EngineModel } from './ports.ts';
import type { RetainedSequences } from './retained-sequences.ts';
import type { RequestSequence } from './sequence.ts';
import type { ComputingBlocks } from './single-flight.ts';
import type { UnitPolicy } from './units.ts';

/** The loop's state, as data: postprocess reads and changes it, and never calls the loop. */
export interface LoopState {
  readonly engine: EngineModel;
  readonly cache: CacheTier | null;
  readonly blockTokens: number;
  readonly decoders: DecoderFactory;
  readonly emit: (jobId: string, event: JobEvent) => void;
  readonly onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  readonly now: () => number;
  /** Admitted and unfinished, in admission order. */
  readonly active: RequestSequence[];
  readonly retained: RetainedSequences;
  readonly computing: ComputingBlocks;
  readonly ends: JobEnds;
  readonly pendingStores: Set<Promise<unknown>>;
  readonly closed: boolean;
  /** Engine forwards run so far. */
  readonly steps: number;
  /** Unit mode (units.ts): prefix units instead of block hits, for a model whose state is not its blocks. */
  readonly units: UnitPolicy | null;
}

/** What completes outside a step and comes back to the loop. */
export type LoopEvent = { type: 'fetched'; seq: RequestSequence } | { type: 'fetchFailed'; seq: RequestSequence; error: unknown } | { type: 'stored'; seq: RequestSequence };

/** I/O postprocess asks the loop to start: a (new) fetch, a prefill-only write-through. */
export interface Io {
  fetch: RequestSequence[];
  flush: RequestSequence[];
}
