/**
 * A primary killed under API traffic (issue #27, "Failover"), shared by failover-api.test.ts (which
 * asserts) and `npm run bench -- failover` (which prints): a Redis Cluster (3 primaries + 3
 * replicas), a 4-shard plane, 2 API processes + 2 workers on one fs store, cluster GC every second.
 *
 *   reference  4 clients play their agent loops once, cold: the right answer of every turn
 *   before     the same loops again, warm (hits, renewals): TTFT before
 *   during     kill -9 the primary holding the job queue's slot, and keep replaying the loops until
 *              the replica is promoted, the cluster is healthy again, and one more full loop each
 *   after      GC must resume (a short-TTL tenant's new blocks expire), the killed node restarts
 *              and rejoins as a replica, and a last replay shows the live blocks still there
 *
 * A request that fails (HTTP error, stream error, connection lost) is retried until it completes
 * (120 s at most); its TTFT counts from its first try. Served = every content delta, over all clients.
 */
import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { setTimeout as sleep } from 'node:timers/promises';

import { RedisMetadataPlane } from '../../../src/kvtier/metadata/index.ts';
import { keySlot, startRedisCluster, type RedisClusterFixture } from '../../helpers/redis-cluster.ts';
import { startWorker, type WorkerProcess } from '../workers/processes.ts';
import { ADMIN_TOKEN, startServe, stopProcesses, type ChatMessage, type ServeProcess } from './cluster-processes.ts';

const CLIENTS = 4;
const TURNS = 4;
const KEYS = { live: 'sk-live', stale: 'sk-stale' } as const;

export interface FailoverFigures {
  requests: number;
  requests_failed: number;
  requests_retried: number;
  wrong_hits: number;
  live_blocks_lost: number;
  failover_stall_ms: number;
  promoted_after_ms: number;
  p99_ttft_before_ms: number;
  p99_ttft_during_ms: number;
  p99_ttft_during_over_before: number;
  /** Time a retried request spent in its failed tries, the most of any. */
  max_added_latency_ms: number;
  gc_resumed: boolean;
  killed_rejoined_as_replica: boolean;
  crossslot_errors: number;
}

interface Turn {
  content: string;
  cached: number;
  ttftMs: number;
  retries: number;
  addedMs: number;
}

const systemOf = (client: number) => `Agent ${client} keeps a storage cluster healthy. Check, act, report in one line. `.repeat(10);
const userOf = (client: number, turn: number) => `Tool result ${turn} for agent ${client}: exit status 0, ${turn * 13 + client} nodes checked. Next?`;

const p99 = (values: number[]) => [...values].sort((a, b) => a - b)[Math.max(0, Math.ceil(values.length * 0.99) - 1)] ?? 0;

export interface FailoverOptions {
  /**
   * Restart the killed node as soon as its replica is promoted (as an orchestrator would), instead of
   * after the traffic: shows whether what stalls waits on the dead node itself.
   */
  restartAtPromotion?: boolean;
}

export async function runFailoverScenario(log: (line: string) => void = () => undefined, options: FailoverOptions = {}): Promise<FailoverFigures> {
  const cluster: RedisClusterFixture = await startRedisCluster({ nodeTimeoutMs: 1500 });
  const apis: ServeProcess[] = [];
  const workers: WorkerProcess[] = [];
  let plane: RedisMetadataPlane | undefined;
  try {
    const crossSlotBefore = cluster.crossSlotErrors();
    const dir = mkdtempSync(join(tmpdir(), 'kvtier-failover-'));
    writeFileSync(join(dir, 'keys.txt'), `${KEYS.live} live\n${KEYS.stale} stale\n`);
    const env = {
      KVTIER_REDIS_CLUSTER: cluster.spec,
      KVTIER_PLANE_SHARDS: '4',
      KVTIER_STORAGE: `fs:${join(dir, 'blocks')}`,
      KVTIER_SECRET: 'failover-test-secret',
      KVTIER_API_KEYS: join(dir, 'keys.txt'),
      KVTIER_GC_INTERVAL_MS: '1000',
    };
    // A job the dying primary acknowledged but never replicated is lost: the API answers 503 after the
    // queue wait (15 s here, 60 s by default) and the client retries.
    for (let a = 0; a < 2; a++) apis.push(await startServe({ ...env, KVTIER_REQUEST_TIMEOUT_MS: '120000', KVTIER_QUEUE_WAIT_TIMEOUT_MS: '15000' }));
    for (let w = 0; w < 2; w++) workers.push(await startWorker({ ...env, KVTIER_MODEL: 'synthetic:tiny', KVTIER_DATA_DIR: mkdtempSync(join(tmpdir(), `kvtier-failover-worker-${w}-`)) }));

    const admin = async <T>(path: string, body?: unknown): Promise<T> => {
      for (const api of apis) {
        try {
          const response = await fetch(`${api.url}${path}`, {
            method: body === undefined ? 'GET' : 'POST',
            headers: { authorization: `Bearer ${ADMIN_TOKEN}`, ...(body === undefined ? {} : { 'content-type': 'application/json' }) },
            body: body === undefined ? undefined : JSON.stringify(body),
          });
          if (response.ok) return (await response.json()) as T;
        } catch {
          // The other API process answers, or the caller's wait retries.
        }
      }
      throw new Error(`${path}: no API process answered`);
    };
    // The plane the processes share (its usage summed over the 4 shards), read directly.
    plane = await RedisMetadataPlane.open({ url: cluster.address, shards: 4 });
    const tenantBlocks = async (tenant: string) => (await plane!.usage()).blocks[`t:${tenant}`] ?? 0;
    const gcExpired = async () => (await admin<{ overview: { gc: { runs: number; expired: { blocks: number } } } }>('/admin/stats/overview')).overview.gc;

    /** Every content delta's arrival, over all clients, while `served` is on. */
    let served: number[] | null = null;
    const stream = async (api: number, key: string, messages: ChatMessage[]): Promise<Turn> => {
      const started = Date.now();
      let retries = 0;
      for (;;) {
        const tryStarted = Date.now();
        try {
          const response = await fetch(`${apis[api].url}/v1/chat/completions`, {
            method: 'POST',
            headers: { 'content-type': 'application/json', authorization: `Bearer ${key}`, 'x-kvtier-class': 'agent' },
            body: JSON.stringify({ model: 'synthetic:tiny', messages, max_tokens: 8, temperature: 0, seed: 7, stream: true, stream_options: { include_usage: true } }),
          });
          if (!response.ok || !response.body) throw new Error(`HTTP ${response.status}: ${await response.text()}`);
          let content = '';
          let cached = 0;
          let ttftMs = -1;
          let buffered = '';
          const decoder = new TextDecoder();
          for await (const chunk of response.body as unknown as AsyncIterable<Uint8Array>) {
            buffered += decoder.decode(chunk, { stream: true });
            let end: number;
            while ((end = buffered.indexOf('\n\n')) !== -1) {
              const data = buffered.slice(0, end).split('\n').find((line) => line.startsWith('data: '))?.slice(6);
              buffered = buffered.slice(end + 2);
              if (!data || data === '[DONE]') continue;
              const event = JSON.parse(data) as { choices?: { delta?: { content?: string } }[]; usage?: { prompt_tokens_details?: { cached_tokens: number } } | null; error?: unknown };
              if (event.error) throw new Error(`stream error: ${JSON.stringify(event.error)}`);
              if (event.usage) cached = event.usage.prompt_tokens_details?.cached_tokens ?? 0;
              const delta = event.choices?.[0]?.delta?.content;
              if (delta) {
                if (ttftMs < 0) ttftMs = Date.now() - started;
                content += delta;
                served?.push(Date.now());
              }
            }
          }
          return { content, cached, ttftMs, retries, addedMs: tryStarted - started };
        } catch (error) {
          retries++;
          if (Date.now() - started > 120_000) throw new Error(`a request did not complete within 120 s of retries: ${(error as Error).message}`);
          log(`retry ${retries}: ${(error as Error).message.slice(0, 160)}`);
          await sleep(100); // a failed try is retried after a pause; the retry loop, not the pause, is what is measured
        }
      }
    };
    /**
     * One pass of every client's agent loop (clients at once, turns in order). A client stays on one API
     * process: that process splices its own replies' sampled ids from its local ReplyMemory (shared
     * through Redis too, but a Redis stalled by the failover would leave another process to re-encode
     * them), so a turn's prompt, and with it the right answer, is the same in every pass.
     */
    const pass = async (): Promise<Turn[][]> =>
      Promise.all(
        Array.from({ length: CLIENTS }, async (_, client) => {
          const messages: ChatMessage[] = [{ role: 'system', content: systemOf(client) }];
          const turns: Turn[] = [];
          for (let turn = 0; turn < TURNS; turn++) {
            messages.push({ role: 'user', content: userOf(client, turn) });
            const result = await stream(client % apis.length, KEYS.live, messages);
            turns.push(result);
            messages.push({ role: 'assistant', content: result.content });
          }
          return turns;
        }),
      );

    // Short TTL for the stale tenant (its blocks are GC's work); the live tenant keeps the default.
    await admin('/admin/policy/edit', { op: 'setTenant', tenant: 'stale', ttlMs: 1000 });
    const reference = await pass();
    const before = await pass();
    const liveBlocksBefore = await tenantBlocks('live');

    const victim = cluster.primaryOfSlot(keySlot('{kvtier}'));
    const replica = cluster.topology().find((t) => t.primary === victim)!.replicas[0];
    log(`killing primary ${victim} (the job queue's slot; its replica ${replica})`);
    served = [];
    const killedAt = Date.now();
    const during: Turn[][] = [];
    let recovered = false;
    // Loops until the cluster is healthy again, then one more whole pass.
    const traffic = (async () => {
      while (!recovered) during.push(...(await pass()));
      during.push(...(await pass()));
    })();
    await cluster.kill(victim);
    await cluster.waitRole(replica, 'master');
    const promotedAfterMs = Date.now() - killedAt;
    log(`replica promoted after ${promotedAfterMs} ms`);
    if (options.restartAtPromotion) await cluster.restart(victim);
    await cluster.waitHealthy();
    recovered = true;
    await traffic;
    const servedDuring = [killedAt, ...served];
    served = null;
    let stallMs = 0;
    for (let i = 1; i < servedDuring.length; i++) stallMs = Math.max(stallMs, servedDuring[i] - servedDuring[i - 1]);

    // GC resumes: the stale tenant's new blocks expire under the leases, on every shard.
    const gcAtRecovery = await gcExpired();
    for (let i = 0; i < 2; i++) await stream(i % apis.length, KEYS.stale, [{ role: 'system', content: `Stale tenant job ${i}. `.repeat(40) }, { role: 'user', content: 'Go.' }]);
    let gcResumed = false;
    for (const deadline = Date.now() + 60_000; Date.now() < deadline && !gcResumed; ) {
      gcResumed = (await gcExpired()).expired.blocks > gcAtRecovery.expired.blocks && (await tenantBlocks('stale')) === 0;
      if (!gcResumed) await sleep(200); // until the next GC tick (1 s); the condition ends the wait
    }

    if (!options.restartAtPromotion) await cluster.restart(victim);
    let rejoined = true;
    await cluster.waitRole(victim, 'slave').catch(() => (rejoined = false));
    rejoined &&= cluster.topology().find((t) => t.primary === replica)?.replicas.includes(victim) ?? false;

    const after = await pass();
    const liveBlocksAfter = await tenantBlocks('live');
    log(`live tenant blocks ${liveBlocksBefore} before the kill, ${liveBlocksAfter} after; GC resumed: ${gcResumed}; rejoined: ${rejoined}`);
    let coldTurns = 0;
    // Whole blocks only: a turn's cache may also end in a worker's RAM tail, which the other worker lacks.
    after.forEach((turns, client) => turns.forEach((turn, i) => (coldTurns += turn.cached < Math.floor(before[client][i].cached / 64) * 64 ? 1 : 0)));

    const crossSlotErrors = cluster.crossSlotErrors() - crossSlotBefore;
    if (crossSlotErrors > 0) log(`CROSSSLOT or failed script calls since the start (${crossSlotErrors}), per node:\n${cluster.errorReport()}`);
    const right = (turns: Turn[][]) => turns.flatMap((loop, i) => loop.map((turn, t) => (turn.content === reference[i % CLIENTS][t].content ? 0 : 1) as number));
    const all = [...during, ...after].flat();
    const ttftBefore = p99(before.flat().map((t) => t.ttftMs));
    const ttftDuring = p99(during.flat().map((t) => t.ttftMs));
    return {
      requests: all.length,
      requests_failed: 0, // a request that does not complete within its retries throws above
      requests_retried: all.filter((t) => t.retries > 0).length,
      wrong_hits: [...right(during), ...right(after)].reduce((a, b) => a + b, 0),
      live_blocks_lost: Math.max(0, liveBlocksBefore - liveBlocksAfter) + coldTurns,
      failover_stall_ms: stallMs,
      promoted_after_ms: promotedAfterMs,
      p99_ttft_before_ms: ttftBefore,
      p99_ttft_during_ms: ttftDuring,
      p99_ttft_during_over_before: Number((ttftDuring / Math.max(1, ttftBefore)).toFixed(2)),
      max_added_latency_ms: Math.max(0, ...all.map((t) => t.addedMs)),
      gc_resumed: gcResumed,
      killed_rejoined_as_replica: rejoined,
      crossslot_errors: crossSlotErrors,
    };
  } finally {
    await stopProcesses(apis, workers);
    await plane?.close();
    await cluster.stop();
  }
}
