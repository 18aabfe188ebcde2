/**
 * The direct hand-off (src/workers/direct-handoff.ts): a whole job for the shared queue goes to an
 * idle worker through one Redis list, and the API keeps it from being lost. Real redis-server, real
 * `kvtier worker` processes. The faults are made by hand with a plain Redis client standing where a
 * worker would: a lease with nobody popping (a stuck taker), a pop with no word after it (a taker
 * that died between the two). A SIGKILL mid-job is a real worker killed on its own `started`.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';
import { afterAll, afterEach, describe, expect, it } from 'vitest';

import { loadConfig } from '../../../src/config.ts';
import type { JobEvent, RequestSpec } from '../../../src/scheduler/job.ts';
import { BullmqRunner } from '../../../src/workers/bullmq-runner.ts';
import { HANDOFF_JOBS_KEY, HANDOFF_LEASES_KEY, HANDOFF_TAKERS_KEY } from '../../../src/workers/direct-handoff.ts';
import { startRedis } from '../../helpers/redis-server.ts';
import { suiteFixture } from '../../helpers/suite-fixture.ts';
import { schedulerJob } from '../scheduler/scheduler-fixtures.ts';
import { startWorker, type WorkerProcess } from './processes.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());
let workers: WorkerProcess[] = [];
const clients: Redis[] = [];

afterEach(async () => {
  await Promise.all(workers.map((w) => w.stop('SIGKILL')));
  workers = [];
  const admin = new Redis(server().url);
  await admin.flushall();
  admin.disconnect();
});
afterAll(() => {
  for (const client of clients) client.disconnect();
});

function worker(env: Record<string, string> = {}): Promise<WorkerProcess> {
  return startWorker({ REDIS_URL: server().url, KVTIER_MODEL: 'synthetic:tiny', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), 'kvtier-handoff-')), ...env }).then((w) => (workers.push(w), w));
}

function redis(): Redis {
  const client = new Redis(server().url, { maxRetriesPerRequest: null });
  clients.push(client);
  return client;
}

/** The API side, with its log lines kept; `shared` dispatch: no job is routed to a worker's own queue by its prefix. */
async function api(): Promise<{ runner: BullmqRunner; logged: string[]; when: (pattern: RegExp) => Promise<string> }> {
  const logged: string[] = [];
  const waiters: Array<{ pattern: RegExp; resolve: (line: string) => void }> = [];
  const runner = await BullmqRunner.connect(loadConfig({}, [], { redisUrl: server().url, model: 'synthetic:tiny', dispatch: 'shared', queueWaitTimeoutMs: 20_000 }), (_level, message) => {
    logged.push(message);
    for (const w of waiters.filter((x) => x.pattern.test(message))) w.resolve(message);
  });
  const when = (pattern: RegExp) => new Promise<string>((resolve) => {
    const seen = logged.find((line) => pattern.test(line));
    if (seen) resolve(seen);
    else waiters.push({ pattern, resolve });
  });
  return { runner, logged, when };
}

async function run(runner: BullmqRunner, job: RequestSpec, signal = new AbortController().signal): Promise<{ events: JobEvent[]; ids: number[] }> {
  const events: JobEvent[] = [];
  await runner.run(job, (event) => events.push(event), signal);
  return { events, ids: events.flatMap((e) => (e.type === 'tokens' ? e.ids : [])) };
}

/**
 * Each change to the hand-off list from now on, by Redis's keyspace notifications (pub/sub, so
 * nothing here races the commands themselves), and a wait for the first of a kind.
 */
async function watchHandoffList(): Promise<{ seen: (operation: 'lpush' | 'lrem') => Promise<void> }> {
  await redis().config('SET', 'notify-keyspace-events', 'Kl');
  const subscriber = redis();
  const operations: string[] = [];
  const waiters: Array<{ operation: string; resolve: () => void }> = [];
  subscriber.on('message', (_channel: string, operation: string) => {
    operations.push(operation);
    for (const w of waiters.filter((x) => x.operation === operation)) w.resolve();
  });
  await subscriber.subscribe(`__keyspace@0__:${HANDOFF_JOBS_KEY}`);
  const seen = (operation: string) => (operations.includes(operation) ? Promise.resolve() : new Promise<void>((resolve) => waiters.push({ operation, resolve })));
  return { seen };
}

/** The job ids BullMQ's shared queue has recorded events for (its events stream keeps them after the job is gone). */
async function queueEventJobIds(): Promise<Set<string>> {
  const entries = (await redis().xrange('bull:kvtier-prefill:events', '-', '+')) as Array<[string, string[]]>;
  const ids = new Set<string>();
  for (const [, fields] of entries) for (let i = 0; i < fields.length; i += 2) if (fields[i] === 'jobId') ids.add(fields[i + 1]);
  return ids;
}

/** A lease as a taker writes it, for a worker id nobody runs under. */
async function ghostTaker(client: Redis, id: string): Promise<void> {
  const until = Date.now() + 600_000;
  await client.multi().zadd(HANDOFF_TAKERS_KEY, until, id).zadd(HANDOFF_LEASES_KEY, until, id).exec();
}

const prompt = (seed: number) => Array.from({ length: 70 }, (_, i) => 1 + ((i * 7 + seed) % 400));

describe('the direct hand-off', () => {
  it('hands a job to an idle worker, with no BullMQ job, and gives the same reply as the queue', async () => {
    await worker();
    const { runner } = await api();
    try {
      const direct = await run(runner, schedulerJob('direct-1', prompt(1), {}, 5));
      expect(direct.events.at(-1)?.type).toBe('done');
      expect(direct.ids).toHaveLength(5);
      expect((await queueEventJobIds()).has('direct-1'), 'BullMQ never saw the job').toBe(false);
      // The same job through BullMQ (a second API with hand-offs off) samples the same tokens.
      const queued = await BullmqRunner.connect(loadConfig({}, [], { redisUrl: server().url, model: 'synthetic:tiny', dispatch: 'shared', handoff: 'queue' }), () => undefined);
      try {
        const viaQueue = await run(queued, schedulerJob('queued-1', prompt(1), {}, 5));
        expect(viaQueue.ids).toEqual(direct.ids);
        expect((await queueEventJobIds()).has('queued-1'), 'the baseline did go through BullMQ').toBe(true);
      } finally {
        await queued.close();
      }
    } finally {
      await runner.close();
    }
  }, 240_000);

  it('takes back a hand-off nobody pops and runs it from the shared queue', async () => {
    await ghostTaker(redis(), 'stuck-taker');
    await worker({ KVTIER_HANDOFF: 'queue' });
    const { runner, when } = await api();
    try {
      const [result, why] = await Promise.all([run(runner, schedulerJob('unpopped-1', prompt(2), {}, 4)), when(/unpopped-1 moved from the direct hand-off/)]);
      expect(why).toMatch(/no worker took the hand-off/);
      expect(result.ids).toHaveLength(4);
      expect(await redis().llen(HANDOFF_JOBS_KEY)).toBe(0);
    } finally {
      await runner.close();
    }
  }, 240_000);

  it('moves a hand-off whose taker died between the pop and its word to the shared queue', async () => {
    const taker = redis();
    await ghostTaker(taker, 'dead-taker');
    await worker({ KVTIER_HANDOFF: 'queue' });
    const { runner, when } = await api();
    try {
      const popped = taker.brpop(HANDOFF_JOBS_KEY, 0);
      const running = run(runner, schedulerJob('popped-1', prompt(3), {}, 4));
      expect(JSON.parse((await popped)![1]).id).toBe('popped-1');
      const [result, why] = await Promise.all([running, when(/popped-1 moved from the direct hand-off/)]);
      expect(why).toMatch(/said nothing/);
      expect(result.ids).toHaveLength(4);
    } finally {
      await runner.close();
    }
  }, 240_000);

  it('re-runs a job whose worker was SIGKILLed mid-job on another, each token once', async () => {
    const victim = await worker({ KVTIER_JOB_LOCK_MS: '1000' });
    const { runner, when } = await api();
    try {
      const reference = await run(runner, schedulerJob('reference-1', prompt(4), {}, 1800));
      const events: JobEvent[] = [];
      let killed: Promise<void> | null = null;
      const running = runner.run(schedulerJob('killed-1', prompt(4), {}, 1800), (event) => {
        events.push(event);
        // On the first tokens the job is surely held by the only worker there is.
        if (event.type === 'tokens' && killed === null) killed = victim.stop('SIGKILL').then(() => worker({ KVTIER_HANDOFF: 'queue' })).then(() => undefined);
      }, new AbortController().signal);
      const [, why] = await Promise.all([running, when(/killed-1 moved from the direct hand-off/)]);
      await killed;
      expect(why).toMatch(/lease lapsed/);
      expect(events.flatMap((e) => (e.type === 'tokens' ? e.ids : []))).toEqual(reference.ids);
      expect(events.at(-1)?.type).toBe('done');
    } finally {
      await runner.close();
    }
  }, 240_000);

  it('takes a cancelled hand-off back off the list', async () => {
    await ghostTaker(redis(), 'stuck-taker');
    const { runner } = await api();
    const { seen } = await watchHandoffList();
    try {
      const abort = new AbortController();
      const running = run(runner, schedulerJob('cancelled-1', prompt(5), {}, 4), abort.signal).then(() => 'ended', () => 'aborted');
      await seen('lpush');
      expect(await redis().llen(HANDOFF_JOBS_KEY)).toBe(1);
      abort.abort();
      expect(await running).toBe('aborted');
      await seen('lrem');
      expect(await redis().llen(HANDOFF_JOBS_KEY)).toBe(0);
    } finally {
      await runner.close();
    }
  }, 60_000);
});
