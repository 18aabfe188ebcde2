/**
 * Purge and counters across a cluster of processes: two `kvtier serve` API
 * processes and two `kvtier worker` processes on a real redis-server and one
 * real S3 store (Ceph RGW), dispatching round-robin so both workers hold
 * both tenants' prefixes (index, hot RAM tier, retained sequences).
 *
 * - `kvtier purge --tenant acme --yes` (the CLI, against API 1): afterwards
 *   every worker misses acme's prompts, through either API (probed with
 *   `x-kvtier-cache: no-store`, which also proves a no-store request leaves
 *   no block); beta's prompts still hit on both workers.
 * - counters: requests, hit/miss tokens, blocks and bytes written (checked
 *   against the objects on S3) and GC tallies (checked against the GC report)
 *   are counted once in the overview, whichever API is asked, and /metrics
 *   of each API reports the cluster's bytes written once.
 *
 * Run by purge-stats.test.ts (one redis-server, REDIS_URL) and purge-stats-cluster.test.ts (a Redis
 * Cluster of 3 primaries + 3 replicas, KVTIER_REDIS_CLUSTER): the same processes and checks, and on
 * the cluster also no CROSSSLOT anywhere and the token streams carried by sharded pub/sub.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { openBlobStore, type BlobStore } from '../../../storage-adapters/index.ts';
import { startCephS3, type CephS3 } from '../../helpers/ceph-s3.ts';
import { startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';
import { kvtier } from '../cli/cli-runner.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from '../workers/processes.ts';
import { ADMIN_TOKEN, startServe, stopProcesses, type ServeProcess } from './cluster-processes.ts';
import { writesLanded as landed } from './writes-landed.ts';

const KEYS = { acme: 'sk-acme', beta: 'sk-beta' } as const;
type Tenant = keyof typeof KEYS;
const STEP_MS = 300;
/** Workers store a heartbeat this often here (2 s by default): each wait for written blocks takes two. */
const HEARTBEAT_MS = 200;

const systemOf = (tenant: Tenant) => `You are the ${tenant} build agent. Follow the plan, call tools, report briefly. `.repeat(14);

interface Usage {
  prompt_tokens: number;
  completion_tokens: number;
  prompt_tokens_details: { cached_tokens: number };
}

export function purgeStatsSuite(mode: 'redis' | 'redis-cluster'): void {
let redis: RedisProcess | undefined;
let cluster: RedisClusterFixture | undefined;
let crossSlotBefore = 0;
let ceph: CephS3;
let store: BlobStore;
let savedAwsEnv: Record<string, string | undefined> = {};
const apis: ServeProcess[] = [];
const workers: WorkerProcess[] = [];
/** What the test sent and was told, to compare with the cluster's counters. */
const sent = { requests: 0, promptTokens: 0, hitTokens: 0, outputTokens: 0 };
/** Objects on S3 before and right after the purge. */
let beforePurge = { count: 0, bytes: 0 };
let afterPurge = { count: 0, bytes: 0 };

async function ask(api: number, tenant: Tenant, user: string, headers: Record<string, string> = {}): Promise<Usage> {
  const response = await fetch(`${apis[api].url}/v1/chat/completions`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', authorization: `Bearer ${KEYS[tenant]}`, 'x-kvtier-class': 'chat', ...headers },
    body: JSON.stringify({
      model: 'synthetic:tiny',
      messages: [
        { role: 'system', content: systemOf(tenant) },
        { role: 'user', content: user },
      ],
      max_tokens: 4,
      temperature: 0,
    }),
  });
  const body = (await response.json()) as { usage?: Usage };
  if (!response.ok || !body.usage) throw new Error(`chat ${response.status}: ${JSON.stringify(body)}`);
  sent.requests++;
  sent.promptTokens += body.usage.prompt_tokens;
  sent.hitTokens += body.usage.prompt_tokens_details.cached_tokens;
  sent.outputTokens += body.usage.completion_tokens;
  return body.usage;
}

async function storedObjects(): Promise<{ count: number; bytes: number }> {
  let count = 0;
  let bytes = 0;
  for await (const key of store.list()) {
    const blob = await store.get(key);
    if (blob === null) continue;
    count++;
    bytes += blob.byteLength;
  }
  return { count, bytes };
}

async function admin<T>(api: number, path: string, body?: unknown): Promise<T> {
  const response = await fetch(`${apis[api].url}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  if (!response.ok) throw new Error(`${path}: ${response.status} ${text}`);
  return JSON.parse(text) as T;
}

interface OverviewBody {
  overview: {
    requests: number;
    tokens: { hit: number; miss: number; output: number };
    io: { bytesWritten: number; blocksWritten: number };
    gc: { runs: number; expired: { blocks: number; bytes: number }; evicted: { blocks: number } };
  };
}

/** The next request (maybe on the other worker) finds the blocks on S3. */
const writesLanded = () => landed(apis[0].url, ADMIN_TOKEN, workers.length);

/** Waits until every process has flushed its counters (the stats step is 300 ms here) and they stopped moving. */
async function settledOverview(api: number): Promise<OverviewBody['overview']> {
  let last = '';
  for (let i = 0; i < 50; i++) {
    await sleep(4 * STEP_MS);
    const overview = (await admin<OverviewBody>(api, '/admin/stats/overview')).overview;
    const now = JSON.stringify([overview.requests, overview.tokens, overview.io, overview.gc]);
    if (now === last) return overview;
    last = now;
  }
  throw new Error('the counters did not settle');
}

beforeAll(async () => {
  // Independent services start together: the file's wall time is mostly these starts.
  const startCeph = startCephS3();
  if (mode === 'redis') {
    redis = new RedisProcess(await freePort());
    await redis.start();
  } else {
    cluster = await startRedisCluster();
    crossSlotBefore = cluster.crossSlotErrors();
  }
  ceph = await startCeph;
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-purge-stats-'));
  const keysFile = join(dir, 'keys.txt');
  writeFileSync(keysFile, `${KEYS.acme} acme\n${KEYS.beta} beta\n`);
  const storage = `s3://kvtier-purge/blocks?endpoint=${ceph.endpoint}&region=${ceph.region}&forcePathStyle=true&createBucket=true`;
  const env = {
    ...(mode === 'redis' ? { REDIS_URL: redis!.url } : { KVTIER_REDIS_CLUSTER: cluster!.spec }),
    KVTIER_STORAGE: storage,
    AWS_ACCESS_KEY_ID: ceph.accessKeyId,
    AWS_SECRET_ACCESS_KEY: ceph.secretAccessKey,
    KVTIER_SECRET: 'purge-stats-test-secret',
    KVTIER_API_KEYS: keysFile,
    KVTIER_STATS_STEP_MS: String(STEP_MS),
  };
  // The SDK reads credentials from the environment when the client is made; restored in afterAll
  // (test files share a fork's process: vitest.config.ts isolate false).
  savedAwsEnv = { AWS_ACCESS_KEY_ID: process.env.AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY: process.env.AWS_SECRET_ACCESS_KEY };
  process.env.AWS_ACCESS_KEY_ID = ceph.accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = ceph.secretAccessKey;
  store = await openBlobStore(storage);
  const [startedApis, startedWorkers] = await Promise.all([
    Promise.all([0, 1].map(() => startServe({ ...env, KVTIER_DISPATCH: 'roundrobin', KVTIER_REQUEST_TIMEOUT_MS: '120000' }))),
    Promise.all([0, 1].map((w) => startWorker({ ...env, KVTIER_HEARTBEAT_MS: String(HEARTBEAT_MS), KVTIER_MODEL: 'synthetic:tiny', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-purge-worker-${w}-`)) }))),
  ]);
  apis.push(...startedApis);
  workers.push(...startedWorkers);
}, 300_000);

afterAll(async () => {
  await stopProcesses(apis, workers);
  await store?.close();
  await redis?.stop();
  await cluster?.stop();
  await ceph?.stop();
  for (const [name, value] of Object.entries(savedAwsEnv)) {
    if (value === undefined) delete process.env[name];
    else process.env[name] = value;
  }
});

describe(`2 API processes + 2 workers on ${mode === 'redis' ? 'one Redis' : 'a Redis Cluster (3 primaries + 3 replicas)'} and S3`, () => {
  it('kvtier purge --tenant: every node misses that tenant afterwards, the other tenant still hits; a no-store request leaves no block', async () => {
    // Each API rotates over both workers: 4 requests per tenant put each prefix on both workers.
    for (const tenant of ['acme', 'beta'] as const) {
      for (let i = 0; i < 4; i++) {
        const usage = await ask(i % 2, tenant, `warm-up ${i} for ${tenant}`);
        if (i > 0) expect(usage.prompt_tokens_details.cached_tokens, `${tenant} request ${i}`).toBeGreaterThan(0);
        await writesLanded(); // the next request (maybe on the other worker) finds the blocks on S3
      }
    }
    const before = await storedObjects();
    expect(before.count).toBeGreaterThan(0);
    beforePurge = before;

    const purge = await kvtier(['purge', '--tenant', 'acme', '--yes', '--url', apis[0].url, '--token', ADMIN_TOKEN]);
    expect(purge.code, purge.stderr).toBe(0);
    expect(purge.stderr).toMatch(/purge: /); // progress lines
    expect(purge.stdout).toMatch(/purged \d+ of \d+ matching blocks/);
    expect(purge.stdout).toMatch(/2 workers confirmed/);
    const after = await storedObjects();
    expect(after.count).toBeLessThan(before.count);
    afterPurge = after;

    // acme: a miss on every worker, through either API (no-store: the probes put nothing back).
    for (let i = 0; i < 4; i++) {
      const usage = await ask(i % 2, 'acme', `warm-up ${i} for acme`, { 'x-kvtier-cache': 'no-store' });
      expect(usage.prompt_tokens_details.cached_tokens, `acme probe ${i}`).toBe(0);
    }
    await writesLanded(); // a no-store request queues nothing; had it queued a write, it has landed by now
    expect((await storedObjects()).count, 'no-store requests leave no block').toBe(after.count);
    // beta: untouched, a hit on both workers.
    for (let i = 0; i < 4; i++) {
      const usage = await ask(i % 2, 'beta', `after the purge ${i} for beta`);
      expect(usage.prompt_tokens_details.cached_tokens, `beta request ${i}`).toBeGreaterThan(0);
      await writesLanded();
    }
  }, 300_000);

  it('requests, tokens, bytes written and GC tallies are counted once, whichever API process is asked', async () => {
    await writesLanded();
    const final = await storedObjects();
    // Nothing was deleted but by the purge: everything written is what S3 had before it plus what it gained since.
    const written = { count: beforePurge.count + final.count - afterPurge.count, bytes: beforePurge.bytes + final.bytes - afterPurge.bytes };
    const gcBefore = (await settledOverview(0)).gc;
    // GC through API 2: beta's TTL cut to 1 s, so the run has blocks to expire.
    await admin(1, '/admin/policy/edit', { op: 'setTenant', tenant: 'beta', ttlMs: 1000 });
    await sleep(1500); // the TTL itself must pass (time is what is tested here): every beta block was last used before the edit
    const gc = await admin<{ removed: { expired: { blocks: number; bytes: number }; evicted: { blocks: number } } }>(1, '/admin/gc', {});
    expect(gc.removed.expired.blocks).toBeGreaterThan(0);
    for (const api of [0, 1]) {
      const o = await settledOverview(api);
      expect(o.requests, `requests via API ${api + 1}`).toBe(sent.requests);
      expect(o.tokens.hit).toBe(sent.hitTokens);
      expect(o.tokens.miss).toBe(sent.promptTokens - sent.hitTokens);
      expect(o.tokens.output).toBe(sent.outputTokens);
      // Every block was written once (later requests adopt it from S3).
      expect(o.io.blocksWritten).toBe(written.count);
      expect(o.io.bytesWritten).toBe(written.bytes);
      expect(o.gc.runs - gcBefore.runs).toBe(1);
      expect(o.gc.expired.blocks - gcBefore.expired.blocks).toBe(gc.removed.expired.blocks);
      expect(o.gc.expired.bytes - gcBefore.expired.bytes).toBe(gc.removed.expired.bytes);
    }
    // /metrics: the cluster's bytes written, once, on each API process.
    const overview = await settledOverview(0);
    for (const api of apis) {
      const metrics = await (await fetch(`${api.url}/metrics`)).text();
      const written = Number(/kvtier_storage_bytes_total\{direction="written"\} (\d+)/.exec(metrics)?.[1]);
      expect(written).toBe(overview.io.bytesWritten);
    }
  }, 300_000);

  if (mode === 'redis-cluster') {
    it('on the cluster: no command raised CROSSSLOT, and the token streams crossed by sharded pub/sub (SPUBLISH on the primaries)', () => {
      expect(cluster!.crossSlotErrors() - crossSlotBefore).toBe(0);
      let spublish = 0;
      const perPrimary: Record<number, number> = {};
      for (const { primary } of cluster!.topology()) {
        const calls = Number(/cmdstat_spublish:calls=(\d+)/.exec(cluster!.cli(primary, 'INFO', 'commandstats'))?.[1] ?? 0);
        perPrimary[primary] = calls;
        spublish += calls;
      }
      // Every event of every request (started, tokens, end) went worker → the reply channel's primary → API.
      expect(spublish, JSON.stringify(perPrimary)).toBeGreaterThan(sent.requests);
    });
  }
});
}
