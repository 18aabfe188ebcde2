/**
 * The embedded default: one engine thread in this process runs every job.
 * Bounded: more than `maxQueueDepth` jobs waiting → 429 KVT_ERR_QUEUE_FULL.
 */
import { KvtError } from '../errors.ts';
import type { RetentionPolicyDoc } from '../kvtier/index.ts';
import type { EngineHost } from './engine-host.ts';
import type { AdminCall, JobRunner, RunnerStatus } from './job-runner.ts';
import { type JobEvent, type RequestSpec } from '../scheduler/index.ts';

export class InprocRunner implements JobRunner {
  readonly kind = 'inproc' as const;
  private waiting = 0;
  private running = 0;

  constructor(
    private readonly host: EngineHost,
    private readonly options: { maxQueueDepth: number; maxBatch: number },
  ) {}

  run(job: RequestSpec, onEvent: (event: JobEvent) => void, signal: AbortSignal): Promise<void> {
    if (!this.host.alive) return Promise.reject(new KvtError('KVT_ERR_WORKER_LOST', 'the engine thread is not running; restart the server'));
    // Room for a full decode batch plus the queue; beyond that, shed load instead of queueing without bound.
    if (this.waiting + this.running >= this.options.maxBatch + this.options.maxQueueDepth) {
      return Promise.reject(
        new KvtError('KVT_ERR_QUEUE_FULL', `${this.running} requests running and ${this.waiting} waiting (KVTIER_MAX_BATCH=${this.options.maxBatch}, KVTIER_MAX_QUEUE=${this.options.maxQueueDepth})`),
      );
    }
    return new Promise<void>((resolve, reject) => {
      let started = false;
      this.waiting++;
      const settle = () => {
        if (started) this.running--;
        else this.waiting--;
        signal.removeEventListener('abort', onAbort);
      };
      const onAbort = () => {
        this.host.cancel(job.id);
        this.host.release(job.id);
        settle();
        reject(signal.reason ?? new KvtError('KVT_ERR_INTERNAL', 'aborted'));
      };
      if (signal.aborted) return onAbort();
      signal.addEventListener('abort', onAbort, { once: true });
      this.host.submit(job, (event) => {
        if (!started && event.type !== 'error') {
          started = true;
          this.waiting--;
          this.running++;
        }
        if (event.type === 'error') {
          settle();
          reject(new KvtError(event.code, event.message));
          return;
        }
        onEvent(event);
        if (event.type === 'done') {
          settle();
          resolve();
        }
      });
    });
  }

  status(): RunnerStatus {
    return { kind: 'inproc', ready: this.host.alive, waiting: this.waiting, running: this.running, detail: this.host.info.cacheProblem };
  }

  policy(): RetentionPolicyDoc | null {
    return this.host.policy;
  }

  async admin(call: AdminCall): Promise<unknown> {
    return (await this.host.admin(call)).result;
  }

  close(): Promise<void> {
    return this.host.close();
  }
}
