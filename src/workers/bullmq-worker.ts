/**
 * `kvtier worker`: consumes prefill jobs from the BullMQ queue with an engine
 * thread of its own, and publishes each job's events on the job's reply
 * channel. Any number of these may run, on any machine that sees the same
 * Redis and the same storage (KVTIER_STORAGE); a block one computes is a hit
 * for every other.
 *
 * The processor's promise settles when the engine thread reports done or
 * error, so BullMQ keeps renewing the job's lock exactly as long as the job
 * runs here; if this process dies the lock lapses and the stalled check
 * gives the job to another worker.
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';

import { UnrecoverableError, Worker, type Job } from 'bullmq';
import { Redis } from 'ioredis';

import { gcUnderClusterLease } from '../cluster/index.ts';
import type { Config } from '../config.ts';
import { EngineHost, type EngineLog } from './engine-host.ts';
import { CANCEL_CHANNEL, QUEUE_NAME, WORKER_STATS_PREFIX, type PublishedEvent, type QueuedJob } from './bullmq-runner.ts';
import { modelIdOf, type JobEvent } from './job.ts';

export interface RunningWorker {
  id: string;
  host: EngineHost;
  close(): Promise<void>;
}

export async function startBullmqWorker(config: Config, log: EngineLog): Promise<RunningWorker> {
  if (!config.redisUrl) throw Object.assign(new Error('kvtier worker needs REDIS_URL (or --redis-url)'), { code: 'KVT_ERR_CONFIG_INVALID' });
  const workerId = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`;
  const host = await EngineHost.start(
    {
      model: config.model,
      dataDir: config.dataDir,
      storage: config.storage,
      redisUrl: config.redisUrl,
      threads: config.threads,
      blockTokens: config.blockTokens,
      hotCacheBytes: config.hotCacheBytes,
      poolBytes: config.poolBytes,
      maxBatch: config.maxBatch,
    },
    log,
  );
  const options = { maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(200 * times, 1000) };
  const publisher = new Redis(config.redisUrl, options);
  const cancels = new Redis(config.redisUrl, options);
  publisher.on('error', (error: Error) => log('warn', `redis: ${error.message}`));
  cancels.on('error', (error: Error) => log('warn', `redis: ${error.message}`));
  await cancels.subscribe(CANCEL_CHANNEL);
  cancels.on('message', (_channel: string, jobId: string) => host.cancel(jobId));

  const processJob = async (job: Job): Promise<unknown> => {
    // One GC at a time across the cluster: while another node holds the lease this job fails with KVT_ERR_CLUSTER_GC_BUSY naming it.
    if (job.name === 'gc') return gcUnderClusterLease(publisher, workerId, () => host.admin({ op: 'gc' }));
    const data = job.data as QueuedJob;
    if (data.model !== modelIdOf(config.model)) {
      throw new UnrecoverableError(`KVT_ERR_WORKER_FAILED: this worker serves ${config.model}, the job asks for ${data.model}`);
    }
    const runId = randomUUID();
    const publish = (event: JobEvent): void => {
      const message: PublishedEvent = { jobId: data.id, runId, event };
      void publisher.publish(data.replyChannel, JSON.stringify(message)).catch((error: Error) => log('warn', `publish failed: ${error.message}`));
    };
    return new Promise((resolve, reject) => {
      host.submit(data, (event) => {
        publish(event);
        if (event.type === 'done') resolve({ finishReason: event.finishReason, completionTokens: event.completionTokens, workerMs: event.workerMs, workerId });
        // The API already has the error event; failing the job records it in BullMQ too (no retry: it would fail alike).
        else if (event.type === 'error') reject(new UnrecoverableError(`${event.code}: ${event.message}`));
      });
    });
  };

  // BullMQ leaves a caller-owned connection open: close() ends it.
  const workerClient = new Redis(config.redisUrl, options);
  workerClient.on('error', (error: Error) => log('warn', `redis (worker): ${error.message}`));
  const worker = new Worker(QUEUE_NAME, processJob, {
    connection: workerClient,
    concurrency: config.workerConcurrency,
    lockDuration: config.jobLockMs,
    stalledInterval: Math.max(250, Math.floor(config.jobLockMs / 2)),
    maxStalledCount: 1,
    autorun: true,
  });
  worker.on('error', (error: Error) => log('warn', `worker: ${error.message}`));
  worker.on('failed', (job, error) => log('warn', `job ${job?.id} failed: ${error.message}`));

  const statsTimer = setInterval(() => {
    host
      .admin({ op: 'stats' })
      .then((stats) => publisher.set(`${WORKER_STATS_PREFIX}${workerId}`, JSON.stringify({ workerId, at: Date.now(), ...(stats as object) }), 'EX', 15))
      .catch(() => undefined);
  }, 2000);
  statsTimer.unref();
  log('info', `kvtier worker ${workerId} consuming ${QUEUE_NAME} (model ${config.model}, storage ${config.storage}, concurrency ${config.workerConcurrency})`);
  await worker.waitUntilReady();

  return {
    id: workerId,
    host,
    async close() {
      clearInterval(statsTimer);
      await worker.close();
      await host.close();
      cancels.disconnect();
      publisher.disconnect();
      workerClient.disconnect();
    },
  };
}
