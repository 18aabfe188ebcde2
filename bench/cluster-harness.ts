/**
 * The cluster bench's processes and workload: a fresh cluster (a real
 * redis-server, one or more `kvtier serve` API processes on it, `kvtier
 * worker` processes, a fresh fs dir or S3 prefix) and the agent sessions
 * played against it through the API processes.
 *
 *   sessions ── urlOf(session) ──▶ API process(es) ──▶ Redis (BullMQ) ──▶ workers ──▶ shared block store
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { Redis } from 'ioredis';

import type { CephS3 } from '../test/helpers/ceph-s3.ts';

import { chatStream, sessionSystem, startServe, userTurn, type ChatMessage, type ServeProcess } from '../test/src/cluster/cluster-processes.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from '../test/src/workers/processes.ts';

export const SESSIONS = 8;
export const TURNS = 3;
export const REPLY_TOKENS = Number(process.env.KVTIER_BENCH_CLUSTER_REPLY_TOKENS ?? 24);
/** synthetic:small by default: with synthetic:tiny a request costs less than its trip through the API and Redis. */
export const MODEL = process.env.KVTIER_BENCH_CLUSTER_MODEL ?? 'synthetic:small';
export const BLOCK = 64;

export interface Turn {
  session: number;
  turn: number;
  ttftMs: number;
  promptTokens: number;
  cachedTokens: number;
}

async function chatTimed(url: string, messages: ChatMessage[]): Promise<{ content: string; ttftMs: number; promptTokens: number; cachedTokens: number }> {
  const started = performance.now();
  let ttftMs = Number.NaN;
  const streamed = await chatStream(url, messages, REPLY_TOKENS, 0, () => (ttftMs = performance.now() - started), MODEL);
  return { content: streamed.content, ttftMs, promptTokens: streamed.promptTokens ?? 0, cachedTokens: streamed.cachedTokens ?? 0 };
}

/**
 * SESSIONS sessions at once, TURNS turns each in order; session s (0-based) talks to `urlOf(s)`.
 * `sessionBase` keeps passes apart (the warm-up's sessions never share a prefix with the measured ones).
 */
export async function workload(urlOf: (session: number) => string, sessionBase: number): Promise<{ seconds: number; turns: Turn[] }> {
  const turns: Turn[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, s) => {
      const transcript: ChatMessage[] = [{ role: 'system', content: sessionSystem(sessionBase + s) }];
      for (let t = 0; t < TURNS; t++) {
        transcript.push({ role: 'user', content: userTurn(sessionBase + s, t) });
        const reply = await chatTimed(urlOf(s), transcript);
        transcript.push({ role: 'assistant', content: reply.content });
        turns.push({ session: s, turn: t, ttftMs: reply.ttftMs, promptTokens: reply.promptTokens, cachedTokens: reply.cachedTokens });
      }
    }),
  );
  return { seconds: (performance.now() - started) / 1000, turns };
}

export interface ClusterSpec {
  workers: Array<Record<string, string>>;
  /** One API process per entry (its own env on top of the cluster's), all on the same Redis, workers and store. Default: one. */
  apis?: Array<Record<string, string>>;
  /** Env for every worker. */
  worker?: Record<string, string>;
  /** Blocks on this S3 server (a fresh prefix per cluster) instead of a fresh fs dir. */
  s3?: CephS3;
}

let clusterSerial = 0;

/** `body` gets the API processes' URLs in `spec.apis` order. */
export async function withCluster<T>(spec: ClusterSpec, body: (urls: string[], redisUrl: string) => Promise<T>): Promise<T> {
  const redis = new RedisProcess(await freePort());
  await redis.start();
  const blocks = mkdtempSync(join(tmpdir(), 'kvtier-bench-cluster-'));
  const storage = spec.s3
    ? `s3://kvtier-bench-cluster/run-${process.pid}-${++clusterSerial}?endpoint=${encodeURIComponent(spec.s3.endpoint)}&createBucket=true` +
      `&accessKeyId=${encodeURIComponent(spec.s3.accessKeyId)}&secretAccessKey=${encodeURIComponent(spec.s3.secretAccessKey)}`
    : `fs:${blocks}`;
  const env = { REDIS_URL: redis.url, KVTIER_STORAGE: storage };
  const workers: WorkerProcess[] = [];
  const apis: ServeProcess[] = [];
  try {
    for (const own of spec.apis ?? [{}]) apis.push(await startServe({ ...env, KVTIER_MODEL: MODEL, ...own }));
    for (const [w, own] of spec.workers.entries()) {
      workers.push(await startWorker({ ...env, KVTIER_MODEL: MODEL, KVTIER_WORKER_CONCURRENCY: '4', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-bench-worker-${w}-`)), ...spec.worker, ...own }));
    }
    return await body(
      apis.map((a) => a.url),
      redis.url,
    );
  } finally {
    await Promise.all(apis.map((a) => a.stop()));
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await redis.stop();
    rmSync(blocks, { recursive: true, force: true });
  }
}

export const p50 = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
};

export const mean = (values: number[]): number => values.reduce((a, b) => a + b, 0) / values.length;

/** The median (the mean of the two middle values for an even count). */
export const median = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  const mid = sorted.length >> 1;
  return sorted.length % 2 ? sorted[mid] : (sorted[mid - 1] + sorted[mid]) / 2;
};

/** Bytes one block takes in a worker's hot tier, from the workers' heartbeat stats. */
export async function hotBytesPerBlock(redisUrl: string): Promise<number | null> {
  const client = new Redis(redisUrl);
  try {
    const keys = await client.keys('kvtier:{workers}:*');
    for (const value of keys.length > 0 ? await client.mget(keys) : []) {
      const hot = value ? (JSON.parse(value) as { cache?: { hotCache?: { blocks: number; bytes: number } } }).cache?.hotCache : undefined;
      if (hot && hot.blocks > 0) return hot.bytes / hot.blocks;
    }
    return null;
  } finally {
    client.disconnect();
  }
}
