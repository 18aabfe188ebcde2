/**
 * The cluster as processes: `kvtier serve` with REDIS_URL, three
 * `kvtier worker` processes, a real redis-server, and one shared block store
 * — a real Ceph RGW (S3) and, again, a shared fs directory. Compared against
 * an embedded `kvtier serve` (no Redis) on the same workload:
 *
 * - 7 agent sessions × 3 turns, one request at a time: every job's worker is
 *   read from BullMQ's completed events. From turn 2 on every turn is a
 *   prefix hit, also when it runs on a worker that never saw the session;
 *   every reply equals the embedded run's.
 * - a worker SIGKILLed while it holds jobs: BullMQ's stalled check moves them
 *   to the other workers; every request completes, with the embedded reply.
 *
 * The API sends jobs through BullMQ (KVTIER_HANDOFF=queue): the stalled check
 * and the completed events are BullMQ's. The direct hand-off's own faults are
 * test/src/workers/direct-handoff.test.ts.
 *
 * Every wait here is on an event (a QueueEvents event, a worker's `started` /
 * `done` message on the API's reply channel), never on a fixed time: the
 * kill is triggered by the worker's own `started` message for the last job,
 * and the jobs it held are the ones it started and never reported done.
 */
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { EventEmitter, once } from 'node:events';

import { QueueEvents } from 'bullmq';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { GC_LEADER_KEY, RedisLeaderLock } from '../../../src/cluster/index.ts';
import { QUEUE_NAME } from '../../../src/workers/index.ts';
import { startCephS3, type CephS3 } from '../../helpers/ceph-s3.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from '../workers/processes.ts';
import { writesLanded } from './writes-landed.ts';
import { ADMIN_TOKEN, chat, chatStream, killTree, sessionSystem, startServe, stopProcesses, userTurn, type ChatMessage, type ServeProcess, type TurnResult } from './cluster-processes.ts';

/** A worker's message to the API on its reply channel (bullmq-protocol.ts PublishedEvent), the fields used here. */
interface RunMessage {
  jobId: string;
  runId: string;
  started?: { workerId: string };
  event?: { type: string };
}

// Odd and prime to 3: the shared queue serves its blocked workers in turn, so with 2 or 3 of them taking
// jobs, session s's next turn lands on another worker. With 8, a round on 2 workers (the third still
// starting on a loaded box) kept every session on one worker: no cross-worker turn (1 run in 10 at load 7).
const SESSIONS = 7;
const TURNS = 3;
const REPLY_TOKENS = 6;
const BLOCK = 64;

/** Plays the sessions turn by turn, one request at a time; `after` runs after each reply. */
async function playSessions(url: string, after: (session: number, turn: number, result: TurnResult) => Promise<void> = async () => {}): Promise<TurnResult[][]> {
  const transcripts: ChatMessage[][] = Array.from({ length: SESSIONS }, (_, s) => [{ role: 'system', content: sessionSystem(s) }]);
  const results: TurnResult[][] = Array.from({ length: SESSIONS }, () => []);
  for (let turn = 0; turn < TURNS; turn++) {
    for (let s = 0; s < SESSIONS; s++) {
      transcripts[s].push({ role: 'user', content: userTurn(s, turn) });
      const result = await chat(url, transcripts[s], REPLY_TOKENS);
      transcripts[s].push({ role: 'assistant', content: result.content });
      results[s].push(result);
      await after(s, turn, result);
    }
  }
  return results;
}

const killPrompt = (i: number): ChatMessage[] => [
  { role: 'system', content: sessionSystem(100 + i) },
  { role: 'user', content: `Write a long status report number ${i}.` },
];
const KILL_REPLY_TOKENS = 250;
/** Prompts whose (seeded) reply runs to max_tokens, so all are still running when the worker dies. */
const KILL_PROMPTS: ChatMessage[][] = [];
/** Each kill prompt's seed: candidates vary it (with one seed every prompt draws the same uniforms). */
const KILL_SEEDS: number[] = [];

let embedded: ServeProcess;
let reference: TurnResult[][];
let killReference: TurnResult[];

beforeAll(async () => {
  embedded = await startServe({});
  reference = await playSessions(embedded.url);
  killReference = [];
  for (let i = 0; i < 80 && KILL_PROMPTS.length < 6; i++) {
    const result = await chat(embedded.url, killPrompt(i), KILL_REPLY_TOKENS, 1, 7 + i);
    if (result.finishReason === 'length') KILL_PROMPTS.push(killPrompt(i)), killReference.push(result), KILL_SEEDS.push(7 + i);
  }
  expect(KILL_PROMPTS, 'prompts that generate to max_tokens').toHaveLength(6);
}, 240_000);

afterAll(async () => {
  await embedded?.stop();
});

describe.each(['s3', 'fs'] as const)('API + 3 workers on shared %s storage', (backend) => {
  let redis: RedisProcess;
  let ceph: CephS3 | null = null;
  let api: ServeProcess;
  let events: QueueEvents;
  const workers: WorkerProcess[] = [];
  const completed: Array<{ jobId: string; workerId: string }> = [];
  let stalled = 0;
  /** Fires 'completed' and 'stalled' after the counters above change, and 'run' per reply-channel message. */
  const seen = new EventEmitter();
  /** Resolves once `ready()` holds, re-checked on every `event` of `seen`. */
  const until = async (event: string, ready: () => boolean): Promise<void> => {
    while (!ready()) await once(seen, event);
  };
  let replies: Redis;
  let eventsConnection: Redis | undefined;
  let env: Record<string, string>;

  beforeAll(async () => {
    redis = new RedisProcess(await freePort());
    await redis.start();
    if (backend === 's3') {
      ceph = await startCephS3();
      env = {
        KVTIER_STORAGE: `s3://kvtier-topology/blocks?endpoint=${ceph.endpoint}&region=${ceph.region}&forcePathStyle=true&createBucket=true`,
        AWS_ACCESS_KEY_ID: ceph.accessKeyId,
        AWS_SECRET_ACCESS_KEY: ceph.secretAccessKey,
      };
    } else {
      env = { KVTIER_STORAGE: `fs:${mkdtempSync(join(tmpdir(), 'kvtier-topology-blocks-'))}` };
    }
    env.REDIS_URL = redis.url;
    // BullMQ duplicates a caller-owned connection for its blocking reads and leaves this one open: disconnected in afterAll.
    eventsConnection = new Redis(redis.url, { maxRetriesPerRequest: null });
    // Reconnect noise once redis-server stops in afterAll; anything before that is a real problem.
    eventsConnection.on('error', (error: Error) => console.warn(`queue events connection: ${error.message}`));
    // From the stream's start: with the default ('$', "from now") events that land before the first
    // XREAD (waitUntilReady does not wait for it) are lost, and a wait on them runs out (the split flake).
    events = new QueueEvents(QUEUE_NAME, { connection: eventsConnection, lastEventId: '0-0' });
    events.on('completed', ({ jobId, returnvalue }) => {
      const value = (typeof returnvalue === 'string' ? JSON.parse(returnvalue) : returnvalue) as { workerId?: string } | null;
      if (value?.workerId) completed.push({ jobId, workerId: value.workerId });
      seen.emit('completed');
    });
    events.on('stalled', () => {
      stalled++;
      seen.emit('stalled');
    });
    await events.waitUntilReady();
    // The workers' messages to the API (bullmq-protocol.ts PublishedEvent): which worker started a
    // job, and when it reported the job done, as the worker sees it (the client sees it later).
    replies = new Redis(redis.url);
    replies.on('error', (error: Error) => console.warn(`reply channel connection: ${error.message}`));
    // One message, or a run's consecutive messages batched as an array (src/workers/reply-outbox.ts).
    replies.on('pmessage', (_pattern: string, _channel: string, message: string) => {
      const parsed = JSON.parse(message) as RunMessage | RunMessage[];
      for (const one of Array.isArray(parsed) ? parsed : [parsed]) seen.emit('run', one);
    });
    await replies.psubscribe('kvtier:events:*');
    // The shared queue (no cache-aware routing): the claim here is about turns that land on a
    // worker new to the session; dispatch.test.ts covers routing turns to the worker holding them.
    // The processes start together: the file's wall time is mostly these starts.
    const startWorkers = Promise.all(
      [0, 1, 2].map((w) =>
        startWorker({
          ...env,
          KVTIER_MODEL: 'synthetic:tiny',
          KVTIER_WORKER_CONCURRENCY: '2',
          KVTIER_HEARTBEAT_MS: '200', // writesLanded reads the queued bytes from heartbeats
          KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-topology-worker-${w}-`)),
        }),
      ),
    );
    api = await startServe({ ...env, KVTIER_DISPATCH: 'shared', KVTIER_HANDOFF: 'queue', KVTIER_REQUEST_TIMEOUT_MS: '120000', KVTIER_QUEUE_WAIT_TIMEOUT_MS: '60000' });
    workers.push(...(await startWorkers));
  }, 240_000);

  afterAll(async () => {
    await stopProcesses([api], workers);
    await events?.close();
    eventsConnection?.disconnect();
    replies?.disconnect();
    await redis?.stop();
    await ceph?.stop();
  });

  it('7 agent sessions: turns on other workers still hit from turn 2 on; replies equal the embedded run', async () => {
    const workerOf: string[][] = Array.from({ length: SESSIONS }, () => []);
    let requests = 0;
    const results = await playSessions(api.url, async (session) => {
      requests++;
      // One request at a time: the n-th completed event is the n-th request's job.
      await until('completed', () => completed.length >= requests);
      workerOf[session].push(completed[requests - 1].workerId);
      // A job completes before its write-behind lands; on a loaded box S3 can still hold a
      // session's previous blocks in flight when its next turn arrives (2 runs in 10 saw 64 and
      // 512 of 576 cached). The claim is about landed blocks: wait for them once per round.
      if (session === SESSIONS - 1) await writesLanded(api.url, ADMIN_TOKEN, workers.length);
    });
    let crossWorkerTurns = 0;
    for (let s = 0; s < SESSIONS; s++) {
      for (let t = 0; t < TURNS; t++) {
        const got = results[s][t];
        expect(got.content, `session ${s} turn ${t}`).toBe(reference[s][t].content);
        expect(got.promptTokens).toBe(reference[s][t].promptTokens);
        if (t === 0) continue;
        // Everything up to the last full block of the previous turn's prompt is cached.
        const previousFull = Math.floor(results[s][t - 1].promptTokens / BLOCK) * BLOCK;
        expect(got.cachedTokens, `session ${s} turn ${t} on ${workerOf[s][t]}`).toBeGreaterThanOrEqual(previousFull);
        if (!workerOf[s].slice(0, t).includes(workerOf[s][t])) crossWorkerTurns++;
      }
    }
    // The claim is about turns on a worker new to the session: there must be such turns. The shared
    // queue hands jobs to whichever worker waits longest (Redis serves blocked clients in order), so
    // with 3 workers and 16 later turns there are usually several; how many varies from run to run.
    expect(new Set(workerOf.flat()).size).toBeGreaterThanOrEqual(2);
    expect(crossWorkerTurns).toBeGreaterThanOrEqual(1);
  }, 300_000);

  it('POST /admin/gc runs on one worker under the cluster GC lease; while another holds it, the answer names the holder', async () => {
    const gc = () => fetch(`${api.url}/admin/gc`, { method: 'POST', headers: { authorization: `Bearer ${ADMIN_TOKEN}`, 'content-type': 'application/json' }, body: '{}' });
    const answer = async () => {
      const response = await gc();
      return { status: response.status, retryAfter: response.headers.get('retry-after'), body: await response.text() };
    };
    const ran = await answer();
    expect(ran.status, ran.body).toBe(200);
    expect(JSON.parse(ran.body)).toMatchObject({ dryRun: false, removed: { expired: { blocks: 0 } } });
    const lockClient = new Redis(redis.url);
    try {
      const held = await new RedisLeaderLock(lockClient, GC_LEADER_KEY, { owner: 'test-holder', ttlMs: 30_000 }).tryAcquire();
      expect(held.acquired).toBe(true);
      const busy = await answer();
      expect(busy.status, busy.body).toBe(409);
      expect(busy.retryAfter).toBe('5');
      expect(JSON.parse(busy.body).error).toMatchObject({ code: 'KVT_ERR_CLUSTER_GC_BUSY', message: expect.stringContaining('held by test-holder') });
      if (held.acquired) await held.lease.release();
      const again = await answer();
      expect(again.status, again.body).toBe(200);
    } finally {
      lockClient.disconnect();
    }
  }, 120_000);

  it('a worker SIGKILLed mid-job: its jobs finish on the others, every reply unchanged', async () => {
    const stalledBefore = stalled;
    const workerIds = workers.map((w) => /kvtier worker (\S+) ready/.exec(w.output())![1]);
    // Each run of a job (a re-run elsewhere is a new run): its worker, and whether it reported done.
    const runs = new Map<string, { jobId: string; workerId: string; done: boolean }>();
    let victim = '';
    let killed: Promise<void> | null = null;
    const onRun = (m: RunMessage): void => {
      if (m.started) runs.set(m.runId, { jobId: m.jobId, workerId: m.started.workerId, done: false });
      else if (m.event?.type === 'done' && runs.has(m.runId)) runs.get(m.runId)!.done = true;
      // Kill on the worker's own word that it started the last of the jobs: that job has its whole
      // prefill and 250 tokens ahead, so the worker holds at least it when the signal lands.
      if (m.started && killed === null && new Set([...runs.values()].map((r) => r.jobId)).size === KILL_PROMPTS.length) {
        victim = m.started.workerId;
        const process = workers[workerIds.indexOf(victim)];
        killTree(process.child.pid!);
        killed = process.stop('SIGKILL');
      }
    };
    seen.on('run', onRun);
    try {
      const got = await Promise.all(KILL_PROMPTS.map((prompt, i) => chatStream(api.url, prompt, KILL_REPLY_TOKENS, 1, () => {}, 'synthetic:tiny', KILL_SEEDS[i])));
      await killed;
      expect(workerIds, 'the killed worker is one of the three').toContain(victim);
      for (let i = 0; i < KILL_PROMPTS.length; i++) {
        expect(got[i].content, `request ${i}`).toBe(killReference[i].content);
        expect(got[i].finishReason).toBe(killReference[i].finishReason);
      }
      // The replies reach the client through the API's subscription, the run events through this
      // test's own: a 'done' published just before the kill can arrive here after the replies (1 run
      // in 7 under load). Wait until every job has a finished run somewhere; only then is a victim
      // run still unfinished one it held.
      const jobIds = new Set([...runs.values()].map((run) => run.jobId));
      await until('run', () => [...jobIds].every((jobId) => [...runs.values()].some((run) => run.jobId === jobId && run.done)));
      // The jobs the victim held when it died: runs it started and never reported done.
      const held = [...runs.values()].filter((run) => run.workerId === victim && !run.done).map((run) => run.jobId);
      expect(held.length, 'jobs the killed worker held').toBeGreaterThan(0);
      // Each finished in a later run on a live worker.
      for (const jobId of held) {
        expect([...runs.values()].some((run) => run.jobId === jobId && run.workerId !== victim && run.done), `job ${jobId} re-run to done on a live worker`).toBe(true);
      }
      // BullMQ's stall check moved them; its 'stalled' events come on their own stream, maybe after the replies.
      await until('stalled', () => stalled - stalledBefore >= held.length);
    } finally {
      seen.off('run', onRun);
    }
  }, 300_000);
});
