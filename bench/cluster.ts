/**
 * `npm run bench -- cluster`: the agent workload through `kvtier serve`
 * (REDIS_URL, BullMQ) with 1, 2 and 3 `kvtier worker` processes on one shared
 * fs block dir and a real redis-server; model synthetic:small (KVTIER_BENCH_CLUSTER_MODEL), 1 engine thread
 * per worker, each worker on a fresh store so every N sees the same misses.
 *
 * Workload: 8 agent sessions run at once, each 3 turns in order (a long
 * per-session system prompt, tool-result-like user turns, 24-token replies).
 *   rps_N               requests/s of the whole workload with N workers
 *   hit_ratio_of_ideal  (3 workers) cached prompt tokens ÷ the full blocks of the previous turn's prompt
 *   ttft_cached_p50_ms_shared_queue  (3 workers) time to first token of turns ≥ 2, streamed
 * Dispatch is BullMQ's shared queue (first free worker); a cache-aware router
 * is not built yet, so there is no aware/round-robin pair to compare.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { availableParallelism, tmpdir } from 'node:os';
import { join } from 'node:path';

import { chatStream, sessionSystem, startServe, userTurn, type ChatMessage } from '../test/src/cluster/cluster-processes.ts';
import { freePort, RedisProcess, startWorker, type WorkerProcess } from '../test/src/workers/processes.ts';

const SESSIONS = 8;
const TURNS = 3;
const REPLY_TOKENS = Number(process.env.KVTIER_BENCH_CLUSTER_REPLY_TOKENS ?? 24);
/** synthetic:small by default: with synthetic:tiny a request costs less than its trip through the API and Redis. */
const MODEL = process.env.KVTIER_BENCH_CLUSTER_MODEL ?? 'synthetic:small';
const BLOCK = 64;

interface Turn {
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

/** `sessionBase` keeps the warm-up's sessions apart from the measured ones (no cross-pass hits). */
async function workload(url: string, sessionBase: number): Promise<{ seconds: number; turns: Turn[] }> {
  const turns: Turn[] = [];
  const started = performance.now();
  await Promise.all(
    Array.from({ length: SESSIONS }, async (_, s) => {
      const transcript: ChatMessage[] = [{ role: 'system', content: sessionSystem(sessionBase + s) }];
      for (let t = 0; t < TURNS; t++) {
        transcript.push({ role: 'user', content: userTurn(sessionBase + s, t) });
        const reply = await chatTimed(url, transcript);
        transcript.push({ role: 'assistant', content: reply.content });
        turns.push({ session: s, turn: t, ttftMs: reply.ttftMs, promptTokens: reply.promptTokens, cachedTokens: reply.cachedTokens });
      }
    }),
  );
  return { seconds: (performance.now() - started) / 1000, turns };
}

async function withCluster<T>(workerCount: number, body: (url: string) => Promise<T>): Promise<T> {
  const redis = new RedisProcess(await freePort());
  await redis.start();
  const blocks = mkdtempSync(join(tmpdir(), 'kvtier-bench-cluster-'));
  const env = { REDIS_URL: redis.url, KVTIER_STORAGE: `fs:${blocks}` };
  const workers: WorkerProcess[] = [];
  const api = await startServe({ ...env, KVTIER_MODEL: MODEL });
  try {
    for (let w = 0; w < workerCount; w++) {
      workers.push(await startWorker({ ...env, KVTIER_MODEL: MODEL, KVTIER_WORKER_CONCURRENCY: '4', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-bench-worker-${w}-`)) }));
    }
    return await body(api.url);
  } finally {
    await api.stop();
    await Promise.all(workers.map((w) => w.stop('SIGTERM')));
    await redis.stop();
    rmSync(blocks, { recursive: true, force: true });
  }
}

const p50 = (values: number[]): number => {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.floor((sorted.length - 1) / 2)];
};

export async function run(): Promise<Record<string, number | string>> {
  const result: Record<string, number | string> = { cores: availableParallelism(), cluster_model: MODEL, cluster_dispatch: 'bullmq shared queue' };
  for (const n of [1, 2, 3]) {
    const measured = await withCluster(n, async (url) => {
      await workload(url, 1000); // warm-up: JIT, engine pools, worker connections
      return workload(url, 0);
    });
    result[`rps_${n}`] = Number(((SESSIONS * TURNS) / measured.seconds).toFixed(2));
    console.error(`[bench cluster] ${n} worker(s): ${result[`rps_${n}`]} req/s`);
    if (n === 3) {
      let cached = 0;
      let ideal = 0;
      const byKey = new Map(measured.turns.map((t) => [`${t.session}/${t.turn}`, t]));
      const warmTtft: number[] = [];
      for (const t of measured.turns) {
        if (t.turn === 0) continue;
        const previous = byKey.get(`${t.session}/${t.turn - 1}`)!;
        ideal += Math.floor(previous.promptTokens / BLOCK) * BLOCK;
        cached += Math.min(t.cachedTokens, Math.floor(previous.promptTokens / BLOCK) * BLOCK);
        warmTtft.push(t.ttftMs);
      }
      result.hit_ratio_of_ideal = Number((cached / ideal).toFixed(3));
      result.ttft_cached_p50_ms_shared_queue = Number(p50(warmTtft).toFixed(1));
    }
  }
  result.rps_2_over_rps_1 = Number(((result.rps_2 as number) / (result.rps_1 as number)).toFixed(2));
  result.ttft_cached_p50_ms_aware = 'not built (no cache-aware router yet)';
  result.ttft_cached_p50_ms_roundrobin = 'not built (dispatch is the shared queue)';
  return result;
}
