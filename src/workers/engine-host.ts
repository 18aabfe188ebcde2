/**
 * The owner side of an engine thread: starts it, routes job events to their
 * requests, and turns a dead thread into KVT_ERR_WORKER_LOST for every job it
 * held (never a hang).
 */
import type { Worker } from 'node:worker_threads';

import { KvtError } from '../errors.ts';
import type { RetentionPolicyDoc } from '../kvtier/index.ts';
import type { AdminCall } from './job-runner.ts';
import { tsWorker } from './ts-worker.ts';
import { ENGINE_THREAD_URL, type JobEvent, type RequestSpec, type AdminReply, type EngineThreadInit, type FromEngineThread, type ToEngineThread } from '../scheduler/index.ts';

export interface EngineInfo {
  fingerprint: string;
  contextLength: number;
  modelPath: string;
  cacheProblem?: string;
}

export type EngineLog = (level: 'info' | 'warn' | 'error', message: string) => void;

export class EngineHost {
  private readonly handlers = new Map<string, (event: JobEvent) => void>();
  private readonly adminWaiters = new Map<number, { resolve: (reply: AdminReply) => void; reject: (e: unknown) => void }>();
  private nextAdminId = 1;
  /** The tier's retention policy, kept current by the engine thread's notifications (null without a tier). */
  policy: RetentionPolicyDoc | null;
  private dead: KvtError | null = null;
  private closing = false;

  private constructor(
    private readonly worker: Worker,
    readonly info: EngineInfo,
    private readonly log: EngineLog,
    policy: RetentionPolicyDoc | null,
  ) {
    this.policy = policy;
    worker.on('message', (message: FromEngineThread) => this.onMessage(message));
    worker.on('error', (error) => this.die(new KvtError('KVT_ERR_WORKER_LOST', `the engine thread failed: ${error.message}`)));
    worker.on('exit', (code) => this.die(new KvtError('KVT_ERR_WORKER_LOST', `the engine thread exited (code ${code})`)));
  }

  static start(init: EngineThreadInit, log: EngineLog): Promise<EngineHost> {
    const worker = tsWorker(ENGINE_THREAD_URL, init);
    return new Promise((resolve, reject) => {
      const onMessage = (message: FromEngineThread) => {
        if (message.type === 'log') log(message.level, message.message);
        else if (message.type === 'fatal') {
          cleanup();
          void worker.terminate();
          reject(new KvtError(message.error.code, `the engine could not start: ${message.error.message}`));
        } else if (message.type === 'ready') {
          cleanup();
          resolve(new EngineHost(worker, { fingerprint: message.fingerprint, contextLength: message.contextLength, modelPath: message.modelPath, cacheProblem: message.cacheProblem }, log, message.policy ?? null));
        }
      };
      const onExit = (code: number) => {
        cleanup();
        reject(new KvtError('KVT_ERR_WORKER_LOST', `the engine thread exited (code ${code}) before it was ready`));
      };
      const onError = (error: Error) => {
        cleanup();
        reject(new KvtError('KVT_ERR_WORKER_LOST', `the engine thread failed to start: ${error.message}`));
      };
      const cleanup = () => {
        worker.off('message', onMessage);
        worker.off('exit', onExit);
        worker.off('error', onError);
      };
      worker.on('message', onMessage);
      worker.on('exit', onExit);
      worker.on('error', onError);
    });
  }

  get alive(): boolean {
    return this.dead === null;
  }

  /** Sends the job; events go to `onEvent` until done or error. */
  submit(job: RequestSpec, onEvent: (event: JobEvent) => void): void {
    if (this.dead) throw this.dead;
    this.handlers.set(job.id, onEvent);
    this.post({ type: 'submit', job });
  }

  /** Cancels a job this host runs; false when it runs no such job (not here, not yet, or finished). */
  cancel(jobId: string): boolean {
    if (this.dead || !this.handlers.has(jobId)) return false;
    this.post({ type: 'cancel', jobId });
    return true;
  }

  /** Forgets a job's handler (after done/error, or when its request gave up). */
  release(jobId: string): void {
    this.handlers.delete(jobId);
  }

  admin(call: AdminCall): Promise<AdminReply> {
    if (this.dead) return Promise.reject(this.dead);
    const requestId = this.nextAdminId++;
    return new Promise<AdminReply>((resolve, reject) => {
      this.adminWaiters.set(requestId, { resolve, reject });
      this.post({ type: 'admin', requestId, call });
    });
  }

  async close(): Promise<void> {
    if (this.dead) return;
    this.closing = true;
    const closed = new Promise<void>((resolve) => {
      const timer = setTimeout(resolve, 10_000);
      this.worker.on('message', (m: FromEngineThread) => {
        if (m.type === 'closed') {
          clearTimeout(timer);
          resolve();
        }
      });
    });
    this.post({ type: 'close' });
    await closed;
    await this.worker.terminate();
  }

  private post(message: ToEngineThread): void {
    this.worker.postMessage(message);
  }

  private onMessage(message: FromEngineThread): void {
    switch (message.type) {
      case 'event': {
        const handler = this.handlers.get(message.jobId);
        if (message.event.type === 'done' || message.event.type === 'error') this.handlers.delete(message.jobId);
        handler?.(message.event);
        return;
      }
      case 'adminResult': {
        const waiter = this.adminWaiters.get(message.requestId);
        this.adminWaiters.delete(message.requestId);
        if (!waiter) return;
        if (message.ok) waiter.resolve(message.reply);
        else waiter.reject(new KvtError(message.error.code, message.error.message));
        return;
      }
      case 'policy':
        this.policy = message.doc;
        return;
      case 'log':
        this.log(message.level, message.message);
        return;
      case 'fatal':
        this.log('error', `engine thread: ${message.error.code}: ${message.error.message}`);
        return;
      default:
        return;
    }
  }

  private die(error: KvtError): void {
    if (this.dead) return;
    this.dead = error;
    if (!this.closing) this.log('error', error.message);
    for (const [jobId, handler] of this.handlers) handler({ type: 'error', code: error.code, message: `${error.message} (job ${jobId})` });
    this.handlers.clear();
    for (const waiter of this.adminWaiters.values()) waiter.reject(error);
    this.adminWaiters.clear();
  }
}
