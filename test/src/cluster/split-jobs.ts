/**
 * The split tests' (split, split-units) view of a cluster: every completed job of the queues they
 * listen to, as the half of a request it ran (BullMQ's completed events: the worker returns its
 * role, completion and prefill token counts), and the role workers they start.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { workerQueueName } from '../../../src/workers/index.ts';
import { startWorker, type WorkerProcess } from '../workers/processes.ts';
import { CompletedJobEvents } from './completed-job-events.ts';

export interface Half {
  jobId: string;
  role: string;
  workerId: string;
  completionTokens: number;
  prefillTokens: number;
}

export class SplitJobs {
  readonly halves = new Map<string, Half>();
  readonly workers: WorkerProcess[] = [];
  private readonly completed = new CompletedJobEvents<Omit<Half, 'jobId'>>((jobId, value) => this.halves.set(jobId, { jobId, ...value }));

  /** `redisUrl`: read when listening, as the Redis starts after the file's module code ran. */
  constructor(
    private readonly redisUrl: () => string,
    private readonly tempPrefix: string,
  ) {}

  listen(queueName: string): Promise<void> {
    return this.completed.listen(this.redisUrl(), queueName);
  }

  /** A `role` worker of `model` on the shared `blocksDir`, its own queue listened to. */
  async addWorker(role: 'prefill' | 'decode', blocksDir: string, model: string): Promise<void> {
    const worker = await startWorker({
      REDIS_URL: this.redisUrl(),
      KVTIER_STORAGE: `fs:${blocksDir}`,
      KVTIER_MODEL: model,
      KVTIER_ROLE: role,
      KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `${this.tempPrefix}${role}-`)),
    });
    const id = /kvtier worker (\S+) ready/.exec(worker.output())?.[1];
    if (!id) throw new Error(`no worker id in:\n${worker.output()}`);
    await this.listen(workerQueueName(id));
    this.workers.push(worker);
  }

  /** What `found` makes of the completed jobs not in `before`, once it makes something of them. */
  async since<T>(before: Set<string>, what: string, found: (fresh: Half[]) => T | undefined): Promise<T> {
    const deadline = Date.now() + 60_000; // an upper bound only: the completed events end the wait
    for (;;) {
      const fresh = [...this.halves.values()].filter((h) => !before.has(h.jobId));
      const result = found(fresh);
      if (result !== undefined) return result;
      if (Date.now() > deadline) throw new Error(`the request's ${what} did not complete: ${fresh.map((h) => h.jobId)}`);
      await sleep(10);
    }
  }

  close(): Promise<void> {
    return this.completed.close();
  }
}
