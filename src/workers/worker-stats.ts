/**
 * A worker's own share of the cluster counters: its cache tier's I/O, GC and
 * error counts, and its engine's up time, flushed as deltas to the shared
 * stats store every step.
 *
 * Counted here, where they happen, and nowhere else. API processes count the
 * requests they serve (each request once, by the process that answered it)
 * and set the stored-bytes gauges; they no longer follow the workers'
 * cumulative tier counters, which every API process used to add again (two
 * API processes: every GC and every byte written counted twice).
 */
import type { Config } from '../config.ts';
import { describeError } from '../errors.ts';
import { createRedisClient } from '../kvtier/index.ts';
import { openStatsStore, StatsRecorder, type TierSample } from '../stats/index.ts';
import type { EngineHost, EngineLog } from './engine-host.ts';

export interface WorkerStats {
  recorder: StatsRecorder;
  /** Final flush, then closes the store. Call before the engine host closes (the flush samples its tier). */
  close(): Promise<void>;
}

export async function startWorkerStats(config: Config, host: EngineHost, log: EngineLog): Promise<WorkerStats> {
  const stepMs = process.env.KVTIER_STATS_STEP_MS ? Number(process.env.KVTIER_STATS_STEP_MS) : 5000;
  const store = await openStatsStore({ dataDir: config.dataDir, redisUrl: config.redisUrl, stepMs, connect: createRedisClient });
  const recorder = new StatsRecorder({
    store,
    flushMs: stepMs,
    // Counters only: stored bytes/blocks are cluster gauges, set by the API processes.
    sampleTier: async (): Promise<TierSample> => {
      const reply = await host.admin({ op: 'stats' });
      return { cache: reply.op === 'stats' ? reply.result.cache : null };
    },
    engineUp: () => true,
    onError: (error, what) => log('warn', `${what}: ${describeError(error).message}`),
  }).start();
  return {
    recorder,
    async close() {
      await recorder.close().catch((error: unknown) => log('warn', `final stats flush failed: ${describeError(error).message}`));
      await store.close();
    },
  };
}
