/**
 * How the API process runs a prefill job, whatever the transport: an engine
 * thread in this process, or `kvtier worker` processes behind BullMQ.
 *
 * `run` streams the job's events to `onEvent` and resolves once the job is
 * done; it rejects with a KvtError (queue full, Redis down, worker lost,
 * timeout) — it never hangs: every transport bounds the wait.
 */
import type { RetentionPolicyDoc } from '../kvtier/index.ts';
import type { AdminCall, JobEvent, RequestSpec } from '../scheduler/index.ts';

export type { AdminCall };

export interface RunnerStatus {
  kind: 'inproc' | 'bullmq';
  ready: boolean;
  /** Jobs accepted and not yet started by a worker. */
  waiting: number;
  running: number;
  detail?: string;
}

export interface JobRunner {
  readonly kind: 'inproc' | 'bullmq';
  run(job: RequestSpec, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void>;
  status(): RunnerStatus;
  /**
   * The retention policy as last notified by its store (the engine thread's, or Redis pub/sub): read, never
   * fetched, on a request's path. Null while the store is unreachable.
   */
  policy(): RetentionPolicyDoc | null;
  /** The cache tier's admin operations (stats, policy, gc), wherever the tier lives. */
  admin(call: AdminCall): Promise<unknown>;
  close(): Promise<void>;
}
