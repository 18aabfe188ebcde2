/**
 * How the API process runs a prefill job, whatever the transport: an engine
 * thread in this process, or `kvtier worker` processes behind BullMQ.
 *
 * `run` streams the job's events to `onEvent` and resolves once the job is
 * done; it rejects with a KvtError (queue full, Redis down, worker lost,
 * timeout) — it never hangs: every transport bounds the wait.
 */
import type { AdminCall, JobEvent, PrefillJob } from '../scheduler/index.ts';

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
  run(job: PrefillJob, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void>;
  status(): RunnerStatus;
  /** The cache tier's admin operations (stats, policy, gc), wherever the tier lives. */
  admin(call: AdminCall): Promise<unknown>;
  close(): Promise<void>;
}
