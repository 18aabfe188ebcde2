/**
 * What the loop (prefill-scheduler.ts) and postprocess.ts share, as data:
 * the loop's state postprocess reads and changes, the events that come back
 * from I/O, and the I/O postprocess asks the loop to start.
 */
import type { PrefillScheduler } from './prefill-scheduler.ts';
import type { RequestSequence } from './sequence.ts';

/**
 * The loop's state, as data: postprocess reads and changes it, and never
 * calls the loop. The fields are PrefillScheduler's own (declared, with what
 * each holds, there), read-only here: no method of the loop is reachable.
 */
export type LoopState = Readonly<
  Pick<PrefillScheduler, 'engine' | 'cache' | 'blockTokens' | 'decoders' | 'emit' | 'onStorageError' | 'now' | 'active' | 'retained' | 'computing' | 'ends' | 'pendingStores' | 'closed' | 'steps' | 'units'>
>;

/** What completes outside a step and comes back to the loop. */
export type LoopEvent = { type: 'fetched'; seq: RequestSequence } | { type: 'fetchFailed'; seq: RequestSequence; error: unknown } | { type: 'stored'; seq: RequestSequence };

/** I/O postprocess asks the loop to start: a (new) fetch, a prefill-only write-through. */
export interface Io {
  fetch: RequestSequence[];
  flush: RequestSequence[];
}
