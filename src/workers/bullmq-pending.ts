/**
 * The API process's record of one job it queued and waits on (bullmq-runner.ts
 * keeps them by job id; dispatch and the watchdog read and move them).
 */
import { KvtError } from '../errors.ts';
import type { PublishedEvent, QueuedJob } from './bullmq-protocol.ts';
import { type JobEvent } from '../scheduler/index.ts';

export interface PendingJob {
  onEvent: (event: JobEvent) => void;
  resolve: () => void;
  reject: (error: unknown) => void;
  runId: string | null;
  /** Tokens forwarded to the request so far (a re-run's first ones are skipped). */
  forwarded: number;
  /**
   * Tokens seen so far of each run. Two runs can overlap: in a failover a running job's lock can
   * lapse and the job be handed to another worker while the first still publishes.
   */
  seenByRun: Map<string, number>;
  /** Each run's next message number (bullmq-protocol.ts PublishedEvent.seq). */
  nextSeqByRun: Map<string, number>;
  started: boolean;
  prefilledSent: boolean;
  waitTimer: NodeJS.Timeout | null;
  /** The queue the job is on now (it moves to the shared queue when its worker does not take it). */
  queueName: string;
  /** The job as added (re-added unchanged when it moves). */
  queued: QueuedJob | null;
  addedAt: number;
  /** Watchdog checks in a row that found the job's lock gone. */
  lockMisses: number;
  moving: boolean;
}

/**
 * Passes a worker's published event on to the request: a copy is dropped
 * and a lost message ends the job (retryable); a new attempt (the
 * previous worker died) replays only what the request has not seen, and the
 * first `prefilled` only. The job's end (done → error null, or its error) is
 * returned for the caller to settle; null while it runs.
 */
export function relayPublished(pending: PendingJob, published: PublishedEvent): { error: KvtError | null } | null {
  // Each message once, none skipped: a worker re-sends one the channel may have lost (reply-outbox.ts).
  const expected = pending.nextSeqByRun.get(published.runId) ?? 0;
  if (published.seq < expected) return null;
  if (published.seq > expected) {
    return { error: new KvtError('KVT_ERR_WORKER_LOST', `message ${expected} of the job's run ${published.runId} never arrived (its worker gave up re-sending it); retry the request`) };
  }
  pending.nextSeqByRun.set(published.runId, expected + 1);
  if (!pending.seenByRun.has(published.runId)) {
    // A new attempt (the previous worker died, or lost its lock and may still run): replay only what
    // the request has not seen. Runs are counted apart, so their events may interleave.
    pending.runId = published.runId;
    pending.seenByRun.set(published.runId, 0);
    pending.lockMisses = 0;
    // Its worker says which queue it took the job from (it may have moved meanwhile).
    if (published.started) pending.queueName = published.started.queue;
  }
  if (!pending.started) {
    pending.started = true;
    if (pending.waitTimer) clearTimeout(pending.waitTimer);
  }
  const { event } = published;
  if (!event) return null;
  switch (event.type) {
    case 'prefilled':
      if (!pending.prefilledSent) {
        pending.prefilledSent = true;
        pending.onEvent(event);
      }
      return null;
    case 'tokens': {
      let seen = pending.seenByRun.get(published.runId)!;
      const fresh = event.ids.filter(() => ++seen > pending.forwarded);
      pending.seenByRun.set(published.runId, seen);
      if (fresh.length === 0) return null;
      pending.forwarded += fresh.length;
      pending.onEvent({ type: 'tokens', ids: fresh });
      return null;
    }
    case 'done':
      pending.onEvent(event);
      return { error: null };
    case 'error':
      return { error: new KvtError(event.code, event.message) };
  }
  return null;
}
