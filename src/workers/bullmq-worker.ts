/**
 * `kvtier worker`: consumes prefill jobs from BullMQ with an engine thread of
 * its own, and publishes each job's events on the job's reply channel. Any
 * number of these may run, on any machine that sees the same Redis and the
 * same storage (KVTIER_STORAGE); a block one computes is a hit for every other.
 *
 * Queues one worker consumes (see bullmq-protocol.ts and bullmq-runner.ts for who sends what where):
 *
 *   role both      kvtier-prefill (shared)                         + kvtier-prefill-w-<id> (routed to it)
 *   role prefill   kvtier-prefill-prefill (prefill halves) + shared + kvtier-prefill-w-<id>
 *   role decode    kvtier-prefill-decode  (decode halves)  + shared + kvtier-prefill-w-<id>
 *
 * Split-role workers take the shared queue too, so a cluster that lost all
 * workers of one role still serves whole jobs. With KVTIER_HANDOFF=direct
 * (the default) every worker also takes whole jobs handed over directly
 * while it has room (handoff-taker.ts), which the API prefers to the shared
 * queue while some worker takes them. Each queue has its own BullMQ
 * Worker; together they keep about KVTIER_WORKER_CONCURRENCY jobs running (see
 * rebalance()).
 *
 * After every job the worker announces the route keys of the blocks it now
 * holds hot (prompt + reply full blocks) to the cache-aware router, and a
 * heartbeat every 2 s keeps it (and its role) live; a clean shutdown
 * withdraws it, so nothing more is routed to it.
 *
 * The processor's promise settles when the engine thread reports done or
 * error, so BullMQ keeps renewing the job's lock exactly as long as the job
 * runs here; if this process dies the lock lapses: the shared and role
 * queues' stalled check gives the job to another worker, and the API moves a
 * job off a dead worker's own queue (bullmq-watchdog.ts).
 */
import { hostname } from 'node:os';
import { randomUUID } from 'node:crypto';

import { UnrecoverableError, Worker, type Job } from 'bullmq';

import { TokenIds } from '../../inference-core/index.ts';
import { CacheAwareRouter, gcUnderShardLeases, PURGE_CHANNEL, PurgeFollower, routeKeys } from '../cluster/index.ts';
import type { Config } from '../config.ts';
import { isKvtCoded, KvtError } from '../errors.ts';
import { createRedisClient, type RedisClient as Redis } from '../kvtier/index.ts';
import { EngineHost, type EngineLog } from './engine-host.ts';
import { bullmqPrefix, CANCEL_CHANNEL, LIVE_TTL_MS, publishReply, QUEUE_NAME, roleQueueName, routeScope, WORKER_STATS_PREFIX, workerQueueName, fromQueued, type QueuedJob } from './bullmq-protocol.ts';
import { DIRECT_QUEUE } from './direct-handoff.ts';
import { HandoffTaker } from './handoff-taker.ts';
import { ReplyOutbox, type ReplyMessage } from './reply-outbox.ts';
import { replyRecordsWriter, type ReplyRecords } from './reply-records-writer.ts';
import { startWorkerStats } from './worker-stats.ts';
import { engineThreadInit, modelIdOf, type JobEvent } from '../scheduler/index.ts';

export interface BullmqWorkerOptions {
  replyRecords?: ReplyRecords;
}

export interface RunningWorker {
  id: string;
  role: Config['role'];
  host: EngineHost;
  close(): Promise<void>;
}

/** Retry pause of a Worker's job fetch after a Redis error. */
const FETCH_RETRY_MS = 1000;

/** Cancels of jobs this worker does not run (yet): remembered this many at most. */
const MAX_EARLY_CANCELS = 1024;

export async function startBullmqWorker(config: Config, log: EngineLog, workerOptions: BullmqWorkerOptions = {}): Promise<RunningWorker> {
  if (!config.redisUrl) throw new KvtError('KVT_ERR_CONFIG_INVALID', 'kvtier worker needs REDIS_URL (or --redis-url)');
  // BullMQ queue names may not contain ':' (the worker id names its own queue).
  const workerId = `${hostname()}-${process.pid}-${randomUUID().slice(0, 8)}`.replace(/[^A-Za-z0-9._-]/g, '_');
  const role = config.role;
  const host = await EngineHost.start(engineThreadInit(config), log);
  // This worker's tier and engine counters, counted here once (not by every API process).
  const stats = await startWorkerStats(config, host, log);
  const options = { maxRetriesPerRequest: null, retryStrategy: (times: number) => Math.min(200 * times, 1000) };
  const publisher = createRedisClient(config.redisUrl, options);
  const cancels = createRedisClient(config.redisUrl, options);
  publisher.on('error', (error: Error) => log('warn', `redis: ${error.message}`));
  cancels.on('error', (error: Error) => log('warn', `redis: ${error.message}`));
  // Cluster purges (src/cluster/purge-log.ts): applied to this node's index and caches, acknowledged in the heartbeat.
  const purges = new PurgeFollower(publisher, async (purge) => {
    const reply = await host.admin({ op: 'purge', filter: purge.filter, at: purge.at });
    if (reply.op !== 'purge') throw new KvtError('KVT_ERR_INTERNAL', `a purge was answered as ${reply.op}`);
    return { removedBlocks: reply.result.removedBlocks, removedBytes: reply.result.removedBytes };
  });
  await purges.catchUp(); // purges logged while this worker was down: its index on disk still lists those blocks
  await cancels.subscribe(CANCEL_CHANNEL, PURGE_CHANNEL);
  // Every worker hears every cancel. One for a job not in this engine may be for a job this worker locked
  // but has not submitted yet: remembered (boundedly), so that job ends at once instead of running unheard.
  const earlyCancels = new Set<string>();
  /** The running jobs' reply outboxes (closed at shutdown). */
  const outboxes = new Set<ReplyOutbox>();
  cancels.on('message', (channel: string, message: string) => {
    if (channel === PURGE_CHANNEL) return heartbeat();
    if (host.cancel(message)) return;
    earlyCancels.add(message);
    if (earlyCancels.size > MAX_EARLY_CANCELS) earlyCancels.delete(earlyCancels.values().next().value!);
  });

  // The router shares the publisher connection: an announcement is sent before the job's
  // `done` on the same connection, so Redis has it before the client can send its next turn.
  const router = new CacheAwareRouter(publisher, { ttlMs: LIVE_TTL_MS });
  /** The hot RAM tier's size in blocks (the hot set is trimmed to it); learnt from the tier's stats. */
  let hotBlocks = 65_536;
  let withdrawn = false;
  const announce = (keys: string[]): void => {
    if (withdrawn) return;
    router.announce(workerId, keys, Date.now(), role, hotBlocks).catch((error: Error) => log('warn', `announcing hot blocks failed (routing only): ${error.message}`));
  };

  const writeReplies = replyRecordsWriter(config.redisUrl, publisher, workerOptions.replyRecords, log);

  const processJob = async (job: Pick<Job, 'name' | 'data'>, queueName: string): Promise<unknown> => {
    // One GC per plane shard at a time across the cluster (a per-shard job names its shard): while other nodes hold the leases this job fails with KVT_ERR_CLUSTER_GC_BUSY naming them.
    if (job.name === 'gc') {
      const shard: unknown = job.data?.shard;
      const only = typeof shard === 'number' ? [shard] : undefined;
      return gcUnderShardLeases(publisher, workerId, config.planeShards, only, async (shards) => {
        const reply = await host.admin({ op: 'gc', shards });
        if (reply.op !== 'gc') throw new KvtError('KVT_ERR_INTERNAL', `the engine thread answered a gc call with ${reply.op}`);
        return reply.result;
      }).catch(failWithCode);
    }
    const queued: QueuedJob = job.data;
    const data = fromQueued(queued);
    const runId = randomUUID();
    // In order, re-sent until the API hears it: a failover must not lose a token or the end (reply-outbox.ts).
    const outbox = new ReplyOutbox((message) => publishReply(publisher, data.replyChannel, message), (message) => log('warn', message));
    outboxes.add(outbox);
    const publish = (message: ReplyMessage): void => {
      outbox.push(message);
      if (message.event?.type === 'done' || message.event?.type === 'error') void outbox.flushed().then(() => outboxes.delete(outbox));
    };
    const started: ReplyMessage = { jobId: data.id, runId, started: { workerId, queue: queueName } };
    if (data.model !== modelIdOf(config.model)) {
      // Said on the reply channel first: the API ends the request now, not when its watchdog finds the failed job.
      const message = `this worker serves ${config.model}, the job asks for ${data.model}`;
      publish(started);
      publish({ jobId: data.id, runId, event: { type: 'error', code: 'KVT_ERR_WORKER_FAILED', message } });
      throw new UnrecoverableError(`KVT_ERR_WORKER_FAILED: ${message}`);
    }
    if (earlyCancels.delete(data.id)) {
      publish(started);
      const event: JobEvent = { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 };
      publish({ jobId: data.id, runId, event });
      return { finishReason: 'cancelled', completionTokens: 0, prefillTokens: 0, workerMs: 0, workerId, role, queue: queueName };
    }
    // Prompt then reply: what the next turn's prompt starts with (the route announcement's keys).
    const conversation = new TokenIds(data.tokens.length + data.sampling.maxTokens);
    conversation.append(data.tokens);
    const result = new Promise((resolve, reject) => {
      host.submit(data, (event: JobEvent) => {
        if (event.type === 'tokens') conversation.append(event.ids);
        if (event.type === 'done') {
          const keys = routeKeys(routeScope(data), conversation.view, config.blockTokens);
          // No full block: nothing to route the next turn by, and the heartbeat keeps this worker live, so the
          // `done` below is not queued behind an announce MULTI (0.5 ms of a short request's path, bench/RESULTS.md).
          if (keys.length > 0) announce(keys);
          if (writeReplies(data, conversation.view.subarray(data.tokens.length))) event = { ...event, repliesShared: true };
        }
        publish({ jobId: data.id, runId, event });
        if (event.type === 'done') {
          resolve({ finishReason: event.finishReason, completionTokens: event.completionTokens, prefillTokens: event.prefillTokens, workerMs: event.workerMs, workerId, role, queue: queueName });
        }
        // The API already has the error event; failing the job records it in BullMQ too (no retry: it would fail alike).
        else if (event.type === 'error') reject(new UnrecoverableError(`${event.code}: ${event.message}`));
      });
    });
    // The job reaches the engine first; `started` still leads the run's messages, because the engine
    // thread's events arrive as later messages, never within this call.
    publish(started);
    return result;
  };

  const queueNames = [...(role === 'both' ? [] : [roleQueueName(role)]), workerQueueName(workerId), QUEUE_NAME];
  const active = new Map<string, number>([...queueNames, DIRECT_QUEUE].map((name) => [name, 0]));
  /** Runs one job taken from `queueName`, counted in the concurrency budget while it runs. */
  const runCounted = async (job: Pick<Job, 'name' | 'data'>, name: string): Promise<unknown> => {
    active.set(name, (active.get(name) ?? 0) + 1);
    // The job is on its way to the engine before the router's report (a Redis write it need not wait for).
    const processed = processJob(job, name);
    rebalance();
    try {
      return await processed;
    } finally {
      active.set(name, (active.get(name) ?? 1) - 1);
      rebalance();
    }
  };
  // Whole jobs bound for the shared queue, handed over directly (direct-handoff.ts): every worker that
  // consumes the shared queue takes them, split roles too; split halves keep to their role queues.
  const handoffs =
    config.handoff === 'direct'
      ? new HandoffTaker({ redisUrl: config.redisUrl, redisOptions: options, workerId, publisher, leaseMs: config.jobLockMs, hasRoom: () => running() < config.workerConcurrency, run: (queued) => runCounted({ name: 'prefill', data: queued }, DIRECT_QUEUE), log })
      : null;
  const workers: Worker[] = [];
  const ownQueue = workerQueueName(workerId);
  const running = (): number => [...active.values()].reduce((a, b) => a + b, 0);
  /**
   * The shared and role queues may take what the other queues leave of the
   * concurrency budget (≥ 1, BullMQ's floor), so a busy worker leaves their
   * jobs to idle ones. Its own queue keeps the whole budget: those jobs were
   * routed here (the router caps them), and BullMQ reads a raised concurrency
   * only when one of the Worker's jobs ends, so a lowered one would leave
   * them waiting while this worker idles.
   */
  const rebalance = (): void => {
    const total = running();
    handoffs?.roomChanged();
    for (const worker of workers) {
      if (worker.name !== ownQueue) worker.concurrency = Math.max(1, config.workerConcurrency - (total - (active.get(worker.name) ?? 0)));
    }
    // The router balances on it: a hot worker much busier than the others loses its preference.
    if (!withdrawn) router.reportRunning(workerId, total).catch((error: Error) => log('warn', `reporting the running jobs failed (routing only): ${error.message}`));
  };
  // BullMQ leaves a caller-owned connection open: close() ends them.
  const workerClients: Redis[] = [];
  for (const name of queueNames) {
    const client = createRedisClient(config.redisUrl, options);
    client.on('error', (error: Error) => log('warn', `redis (worker ${name}): ${error.message}`));
    workerClients.push(client);
    const worker = new Worker(
      name,
      (job: Job) => runCounted(job, name),
      {
        connection: client,
        prefix: bullmqPrefix(config.redisUrl),
        concurrency: config.workerConcurrency,
        lockDuration: config.jobLockMs,
        stalledInterval: Math.max(250, Math.floor(config.jobLockMs / 2)),
        maxStalledCount: 1,
        // A fetch that failed (in a failover: the queue's slot has no primary for a few seconds) is
        // retried after this, not BullMQ's 15 s: that pause was the longest stall of the failover test.
        runRetryDelay: FETCH_RETRY_MS,
        autorun: true,
      },
    );
    worker.on('error', (error: Error) => log('warn', `worker ${name}: ${error.message}`));
    worker.on('failed', (job, error) => log('warn', `job ${job?.id} failed: ${error.message}`));
    workers.push(worker);
  }

  const heartbeat = (): void => {
    purges
      .catchUp()
      .catch((error: Error) => log('warn', `applying a cluster purge failed (retried at the next heartbeat): ${error.message}`))
      .then(() => host.admin({ op: 'stats' }))
      .then((reply) => {
        const stats = reply.op === 'stats' ? reply.result : { cache: null };
        const hot = stats.cache?.hotCache;
        if (hot && hot.blocks > 0 && hot.bytes > 0 && hot.budgetBytes > 0) hotBlocks = Math.max(1, Math.floor(hot.budgetBytes / (hot.bytes / (hot.blocks + (hot.tails ?? 0)))));
        return publisher.set(`${WORKER_STATS_PREFIX}${workerId}`, JSON.stringify({ workerId, role, at: Date.now(), ...stats, purgeGen: purges.appliedGen, purges: Object.fromEntries(purges.outcomes) }), 'EX', 15);
      })
      .catch((error: Error) => log('warn', `publishing this worker's stats failed (the dashboard shows it stale until the next heartbeat): ${error.message}`));
    announce([]);
  };
  const heartbeatTimer = setInterval(heartbeat, config.heartbeatMs);
  heartbeatTimer.unref();
  await Promise.all(workers.map((w) => w.waitUntilReady()));
  await handoffs?.start();
  // Live (and, for split roles, counted) only once every queue is consumed.
  await router.announce(workerId, [], Date.now(), role, hotBlocks);
  log('info', `kvtier worker ${workerId} (role ${role}) consuming ${[...queueNames, ...(handoffs ? ['direct hand-offs'] : [])].join(', ')} (model ${config.model}, storage ${config.storage}, concurrency ${config.workerConcurrency})`);

  return {
    id: workerId,
    role,
    host,
    async close() {
      clearInterval(heartbeatTimer);
      // Stop being routed to first; jobs still waiting on this worker's own queue are moved
      // to the shared queue by the API once they have waited past its deadline.
      withdrawn = true;
      await router.withdraw(workerId).catch((error: Error) => log('warn', `withdrawing from the router failed: ${error.message}`));
      await Promise.all([...workers.map((w) => w.close()), handoffs?.close()]);
      await stats.close();
      await host.close();
      for (const outbox of outboxes) outbox.close();
      cancels.disconnect();
      publisher.disconnect();
      for (const client of workerClients) client.disconnect();
    },
  };
}

/** BullMQ keeps only a failed job's message: lead it with the error's code, so the API answers with the right status. */
function failWithCode(error: unknown): never {
  const message = error instanceof Error ? error.message : String(error);
  throw new UnrecoverableError(isKvtCoded(error) && !message.startsWith(error.code) ? `${error.code}: ${message}` : message);
}
