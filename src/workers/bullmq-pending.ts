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
  /** Each run's next message number (PublishedEvent.seq) and the messages that overtook a lost one. */
  orderByRun: Map<string, RunOrder>;
  started: boolean;
  prefilledSent: boolean;
  waitTimer: NodeJS.Timeout | null;
  /** The queue the job is on now (it moves to the shared queue when its worker does not take it). */
  queueName: string;
  /** The job as added (re-added unchanged when it moves). */
  queued: QueuedJob | null;
  /** While handed off directly (direct-handoff.ts): the list entry as pushed, to take it back. */
  handoff: string | null;
  /** When a hand-off was found taken, though its taker has not said `started` yet (0: not so). */
  takenAt: number;
  /** The worker running the job's latest run (from its `started`). */
  workerId: string | null;
  addedAt: number;
  /** Watchdog checks in a row that found the job's lock gone. */
  lockMisses: number;
  moving: boolean;
  /** When the watchdog last looked for the job in its queue's failed set (0: not yet). */
  failCheckedAt: number;
}

/** A job's record before it is queued anywhere. */
export function newPendingJob(ends: Pick<PendingJob, 'onEvent' | 'resolve' | 'reject'>, queueName: string): PendingJob {
  return { ...ends, runId: null, forwarded: 0, seenByRun: new Map(), orderByRun: new Map(), started: false, prefilledSent: false, waitTimer: null, queueName, queued: null, handoff: null, takenAt: 0, workerId: null, addedAt: Date.now(), lockMisses: 0, moving: false, failCheckedAt: 0 };
}

export interface RunOrder {
  next: number;
  held: Map<number, PublishedEvent>;
}

/** Messages held for one missing one, at most: past it the run is given up (its worker re-sends in order, so a gap this long is a lost run). */
const MAX_HELD = 4096;

/**
 * Passes a worker's published messages on to the request in each run's seq
 * order (reply-outbox.ts re-sends what a failover lost, so a message may come
 * twice or overtake a lost one): a copy is dropped, one that came early waits
 * for the one it follows. A new attempt (the previous worker died) replays
 * only what the request has not seen, and the first `prefilled` only. The
 * job's end (done → error null, or its error) is returned for the caller to
 * settle; null while it runs.
 */
export function relayPublished(pending: PendingJob, published: PublishedEvent): { error: KvtError | null } | null {
  let order = pending.orderByRun.get(published.runId);
  if (!order) pending.orderByRun.set(published.runId, (order = { next: 0, held: new Map() }));
  if (published.seq < order.next) return null;
  if (published.seq > order.next) {
    order.held.set(published.seq, published);
    if (order.held.size <= MAX_HELD) return null;
    return { error: new KvtError('KVT_ERR_WORKER_LOST', `message ${order.next} of the job's run ${published.runId} never arrived; retry the request`) };
  }
  for (let message: PublishedEvent | undefined = published; message; message = order.held.get(order.next)) {
    order.held.delete(message.seq);
    order.next = message.seq + 1;
    const end = relayInOrder(pending, message);
    if (end) return end;
  }
  return null;
}

function relayInOrder(pending: PendingJob, published: PublishedEvent): { error: KvtError | null } | null {
  if (!pending.seenByRun.has(published.runId)) {
    // A new attempt (the previous worker died, or lost its lock and may still run): replay only what
    // the request has not seen. Runs are counted apart, so their events may interleave.
    pending.runId = published.runId;
    pending.seenByRun.set(published.runId, 0);
    pending.lockMisses = 0;
    // Its worker says which queue it took the job from (it may have moved meanwhile).
    if (published.started) {
      pending.queueName = published.started.queue;
      pending.workerId = published.started.workerId;
    }
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
