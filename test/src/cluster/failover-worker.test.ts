/**
 * The stuck worker of failover-api.test.ts, made deterministic. A BullMQ worker's blocking read
 * (BZPOPMIN) against a killed primary is abandoned by BullMQ's watchdog, which disconnects the
 * blocking client and awaits its connect(). If that reconnect lands while the cluster reports
 * cluster_state:fail (the primary is down, its replica not yet promoted), ioredis's ready check fails
 * and the Cluster reconnects by itself with a new attempt, leaving the promise of the awaited
 * connect() unsettled for good: the worker's fetch loop never runs again, though its client is ready.
 *
 * The window is held open here: the replica may not fail over by itself (cluster-replica-no-failover)
 * until the test has seen the ready check fail, then it takes over.
 */
import { Queue, Worker } from 'bullmq';
import { describe, expect, it } from 'vitest';

import { createRedisClient, type RedisClient } from '../../../src/kvtier/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';

/** The options kvtier's workers and API processes give their clients (bullmq-worker.ts, bullmq-runner.ts). */
const OPTIONS = { maxRetriesPerRequest: null, enableOfflineQueue: true, retryStrategy: (times: number) => Math.min(200 * times, 1000) };

/** Resolves with `promise`, or with `timedOut` if it has not settled within `ms` (an upper bound, not a pace). */
const settledWithin = <T>(promise: Promise<T>, ms: number, timedOut: T): Promise<T> =>
  Promise.race([promise, new Promise<T>((resolve) => setTimeout(() => resolve(timedOut), ms).unref())]);

const nextEvent = (client: RedisClient, event: string): Promise<void> => new Promise((resolve) => client.once(event, () => resolve()));

async function until(what: string, check: () => boolean, timeoutMs = 30_000): Promise<void> {
  for (const deadline = Date.now() + timeoutMs; !check(); ) {
    if (Date.now() > deadline) throw new Error(`${what} did not happen within ${timeoutMs} ms`);
    await new Promise((resolve) => setTimeout(resolve, 50)); // polls redis-cli; the condition ends the wait
  }
}

/** Kills the primary of `{kvtier}` (the job queues' slot) with its replica barred from failing over; returns that replica. */
async function killQueuePrimary(cluster: RedisClusterFixture): Promise<number> {
  const victim = cluster.primaryOfSlot(keySlot('{kvtier}'));
  const replica = cluster.topology().find((t) => t.primary === victim)!.replicas[0];
  cluster.cli(replica, 'CONFIG', 'SET', 'cluster-replica-no-failover', 'yes');
  await cluster.kill(victim);
  const alive = cluster.ports.filter((port) => port !== victim);
  await until('cluster_state:fail on every live node', () => alive.every((port) => /cluster_state:fail/.test(cluster.cli(port, 'CLUSTER', 'INFO'))));
  return replica;
}

async function takeOver(cluster: RedisClusterFixture, replica: number): Promise<void> {
  cluster.cli(replica, 'CLUSTER', 'FAILOVER', 'TAKEOVER');
  await cluster.waitRole(replica, 'master');
  await cluster.waitHealthy();
}

describe('a Redis Cluster client reconnecting while the cluster state is fail', () => {
  it('settles its connect() once the cluster is ready again (the duplicate BullMQ blocks on too)', async () => {
    const cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
    const client = createRedisClient(cluster.address, OPTIONS);
    // BullMQ's blocking connection is a duplicate of the client it is given.
    const blocking = (client as import('ioredis').Cluster).duplicate();
    for (const c of [client, blocking]) c.on('error', () => undefined); // node errors during the kill are expected
    try {
      await blocking.ping();
      const replica = await killQueuePrimary(cluster);
      const ended = nextEvent(blocking, 'end');
      blocking.disconnect();
      await ended;
      const reconnecting = nextEvent(blocking, 'reconnecting'); // the ready check saw cluster_state:fail
      const connected = blocking.connect().then(() => 'connected', (error: Error) => `rejected: ${error.message}`);
      await reconnecting;
      await takeOver(cluster, replica);
      expect(await settledWithin(connected, 30_000, 'never settled')).toBe('connected');
      expect(blocking.status).toBe('ready');
      expect(await blocking.set('{kvtier}:after', '1')).toBe('OK');
    } finally {
      blocking.disconnect();
      client.disconnect();
      await cluster.stop();
    }
  }, 120_000);

  it('a BullMQ worker whose blocking read was reset in that window takes the next job', async () => {
    const cluster = await startRedisCluster({ nodeTimeoutMs: 1000 });
    const workerClient = createRedisClient(cluster.address, OPTIONS);
    const queueClient = createRedisClient(cluster.address, OPTIONS);
    for (const c of [workerClient, queueClient]) c.on('error', () => undefined);
    const taken: string[] = [];
    const waiters: (() => void)[] = [];
    // drainDelay 1: BullMQ's watchdog abandons a blocking read 2 s after it was sent.
    const worker = new Worker('failover-probe', async (job) => void (taken.push(job.id!), waiters.splice(0).forEach((wake) => wake())), {
      connection: workerClient,
      prefix: '{kvtier}',
      drainDelay: 1,
      lockDuration: 2000,
      stalledInterval: 1000,
    });
    worker.on('error', () => undefined);
    const queue = new Queue('failover-probe', { connection: queueClient, prefix: '{kvtier}' });
    queue.on('error', () => undefined);
    const takenWithin = (id: string, ms: number) =>
      settledWithin(
        (async () => {
          while (!taken.includes(id)) await new Promise<void>((wake) => waiters.push(wake));
          return true;
        })(),
        ms,
        false,
      );
    try {
      await worker.waitUntilReady();
      await queue.add('probe', {}, { jobId: 'before' });
      expect(await takenWithin('before', 30_000)).toBe(true);
      // The worker's blocking client (BullMQ keeps it private): its reconnect failing the ready check is the trigger.
      const blockingClient = (await (worker as unknown as { backend: { blockingConnection: { client: Promise<RedisClient> } } }).backend.blockingConnection.client) as RedisClient;
      // Killed while the worker idles in its blocking read (the failover-api case), not while it fetches.
      const primary = cluster.primaryOfSlot(keySlot('{kvtier}'));
      await until('the worker blocked in BZPOPMIN', () => /flags=b .*cmd=bzpopmin/.test(cluster.cli(primary, 'CLIENT', 'LIST')));
      const replica = await killQueuePrimary(cluster);
      await nextEvent(blockingClient, 'reconnecting');
      await takeOver(cluster, replica);
      await queue.add('probe', {}, { jobId: 'after' });
      expect(await takenWithin('after', 60_000)).toBe(true);
    } finally {
      await settledWithin(worker.close(true), 10_000, undefined);
      await settledWithin(queue.close(), 10_000, undefined);
      workerClient.disconnect();
      queueClient.disconnect();
      await cluster.stop();
    }
  }, 180_000);
});
