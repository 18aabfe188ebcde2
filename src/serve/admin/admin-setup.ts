/**
 * Wires the operator's side into the API process:
 *
 *   - a handle of this node's block index and the shared block store (block listing, inspect, purge, GC preview)
 *   - the shared policy store (edits; every process and worker reads it within ~1 s)
 *   - the stats recorder: every finished request, and the cache tier's counters, flushed every few
 *     seconds into the shared stats store (LMDB under <dataDir>/stats, or Redis with REDIS_URL)
 *   - the dashboard page (public HTML); the admin routes go in the guarded
 *     admin plugin (admin-plugin.ts), which buildApp registers with `service`
 */
import { join } from 'node:path';

import type { FastifyInstance } from 'fastify';

import { openBlobStore, type BlobStore } from '../../../storage-adapters/index.ts';
import { describeError } from '../../errors.ts';
import { BlockIndex, BlockSealer, createRedisClient, LmdbPolicyStore, openMetadataPlane, RedisPolicyStore, systemClock, type MetadataPlane, type PolicyStore } from '../../kvtier/index.ts';
import { loadPricing, openStatsStore, StatsRecorder, type Pricing, type StatsStore, type TierSample, type TierSources } from '../../stats/index.ts';
import type { ServeContext } from '../context.ts';
import { registerDashboard } from '../dashboard/index.ts';
import { AdminService, BlockAdmin } from '../../admin/index.ts';

export interface AdminSetupOptions {
  /** Stats flush interval and history step; default 5 s (KVTIER_STATS_STEP_MS). */
  statsStepMs?: number;
  pricing?: Partial<Pricing>;
}

export interface AdminSetup {
  service: AdminService;
  recorder: StatsRecorder;
  /** Final stats flush, then closes what setup opened. Call before the runner closes (the flush samples the tier). */
  close(): Promise<void>;
}

export async function setupAdmin(app: FastifyInstance, ctx: ServeContext, options: AdminSetupOptions = {}): Promise<AdminSetup> {
  const { config } = ctx;
  const stepMs = options.statsStepMs ?? (process.env.KVTIER_STATS_STEP_MS ? Number(process.env.KVTIER_STATS_STEP_MS) : 5000);
  const pricing = loadPricing(process.env, options.pricing);
  const opened: Array<() => Promise<void>> = [];
  const closeAll = async () => {
    for (const close of opened.reverse()) await close().catch((error: unknown) => app.log.warn({ err: error }, 'admin: closing a resource failed'));
  };
  try {
    // Block listing needs the store and index; if they cannot open, the server still serves (as the engine does) and the block routes say why.
    let blockHandles: { store: BlobStore; index: BlockIndex; plane: MetadataPlane } | string;
    try {
      const store = await openBlobStore(config.storage);
      opened.push(() => store.close());
      const index = BlockIndex.open({ path: join(config.dataDir, 'index') });
      opened.push(() => index.close());
      // The cluster's records: purge sweeps them, GC judges by them, and stored bytes/blocks are read from them (each block once).
      const plane = await openMetadataPlane({ dataDir: config.dataDir, redisUrl: config.redisUrl ?? '' });
      opened.push(() => plane.close());
      blockHandles = { store, index, plane };
    } catch (error) {
      const { code, message } = describeError(error);
      blockHandles = `${code}: ${message}`;
      app.log.error({ err: error }, 'admin: the block store or index cannot open; block listing, inspect, purge and GC preview are unavailable');
    }
    const policy: PolicyStore = config.redisUrl
      ? await RedisPolicyStore.open({ url: config.redisUrl })
      : await LmdbPolicyStore.open({ path: join(config.dataDir, 'policy') });
    opened.push(() => policy.close());
    const statsStore: StatsStore = await openStatsStore({ dataDir: config.dataDir, redisUrl: config.redisUrl, stepMs, connect: createRedisClient });
    opened.push(() => statsStore.close());
    const recorder = new StatsRecorder({
      store: statsStore,
      flushMs: stepMs,
      sampleTier: () => sampleTier(ctx, typeof blockHandles === 'string' ? null : blockHandles.plane),
      // The embedded engine runs in this process: its wall time is engine time. (BullMQ: the workers that report.)
      engineUp: () => ctx.runner.kind === 'inproc' && ctx.runner.status().ready,
      onError: (error, what) => app.log.warn({ err: error }, what),
    }).start();
    ctx.service.onEnd((spec, end) =>
      recorder.record({
        tenant: spec.tenant,
        trafficClass: spec.trafficClass,
        promptTokens: end.usage.promptTokens,
        cachedTokens: end.usage.cachedTokens,
        completionTokens: end.usage.completionTokens,
        workerMs: end.workerMs,
      }),
    );
    const blocks =
      typeof blockHandles === 'string'
        ? blockHandles
        : await BlockAdmin.create({
            ...blockHandles,
            policy: () => policy.current(),
            clock: systemClock,
            // The block table shows a sealed block's codec after opening it with its tenant's key, as the tier would.
            opener: config.encryption
              ? { sealer: new BlockSealer(config.encryption, { openThreads: 0 }), salts: (tenant) => [ctx.auth.identity(tenant, false).saltHex, ctx.auth.identity(tenant, true).saltHex] }
              : undefined,
          });
    const service = new AdminService({ blocks, policy, recorder, pricing, tier: ctx.runner });
    // /metrics reports the tier's figures as the cluster counts them (each event once, at its source).
    ctx.metrics.useTierTotals(async () => {
      await recorder.flush(); // this process's own share up to now; workers flush theirs every step
      return (await statsStore.totals()).counters;
    });
    registerDashboard(app, { pricing });
    return {
      service,
      recorder,
      async close() {
        await recorder.close().catch((error: unknown) => app.log.warn({ err: error }, 'admin: final stats flush failed'));
        await closeAll();
      },
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}

/**
 * The serving tier's counters. Embedded: the engine thread's tier. BullMQ:
 * only the workers' stored bytes/blocks (gauges); their I/O, GC and engine
 * time are counted by each worker itself (workers/worker-stats.ts), so that
 * several API processes do not add them again.
 */
async function sampleTier(ctx: ServeContext, plane: MetadataPlane | null): Promise<TierSample | TierSources | null> {
  const stats = (await ctx.runner.admin({ op: 'stats' })) as (TierSample & { workers?: Array<TierSample & { workerId?: string }> }) | null;
  if (!stats) return null;
  // Stored bytes/blocks of the whole cluster, each block once (node indexes overlap: a block hit on two nodes is in both).
  const usage = plane ? await plane.usage() : undefined;
  if (ctx.runner.kind === 'bullmq') {
    if (usage) return { sources: [{ id: 'plane', sample: { cache: null, usage } }], enginesUp: 0 };
    const workers = (stats.workers ?? []).filter((w) => typeof w.workerId === 'string');
    return { sources: workers.map((w) => ({ id: w.workerId!, sample: { cache: null, usage: w.usage } })), enginesUp: 0 };
  }
  return { cache: stats.cache ?? null, usage: usage ?? stats.usage };
}
