/**
 * The admin operations on a data directory, with no server running: the same
 * AdminService the server uses, over this process's own handles of the index,
 * the block store, the policy store and the stats store.
 *
 * Safe beside running processes on the same host: LMDB serialises writers
 * across processes, and a policy edit reaches every process within its
 * policy refresh interval (~1 s).
 */
import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';

import { openBlobStore } from '../../storage-adapters/index.ts';
import { BlockIndex, createRedisClient, LmdbPolicyStore, openMetadataPlane, RedisPolicyStore, systemClock, type GcReport, type PolicyStore, type RetentionPolicyDoc } from '../kvtier/index.ts';
import { AdminService, BlockAdmin, type AdminApi, type AdminProgress, type BlockDetail, type BlockFilter, type BlockListing, type OverviewResponse, type PolicyEdit, type PolicyEditResult, type PurgeFilter, type PurgeReport } from '../admin/index.ts';
import { loadPricing, openStatsStore, StatsRecorder } from '../stats/index.ts';
import { CliError } from './commands/cli-error.ts';

export interface LocalAdminOptions {
  dataDir: string;
  /** Default `fs:<dataDir>/blocks` (KVTIER_STORAGE). */
  storage?: string;
  redisUrl?: string | null;
}

export class LocalAdmin implements AdminApi {
  readonly target: string;

  private constructor(
    private readonly service: AdminService,
    private readonly closers: Array<() => Promise<void>>,
    dataDir: string,
  ) {
    this.target = `data dir ${dataDir}`;
  }

  static async open(options: LocalAdminOptions): Promise<LocalAdmin> {
    const dataDir = resolve(options.dataDir);
    if (!existsSync(dataDir) || !statSync(dataDir).isDirectory()) {
      throw new CliError('KVT_ERR_CLI_BAD_VALUE', `no data directory at ${dataDir}; pass --data-dir DIR (the server's KVTIER_DATA_DIR) or --url of a running server`);
    }
    const closers: Array<() => Promise<void>> = [];
    const closeAll = async () => {
      for (const close of closers.reverse()) await close();
    };
    try {
      const store = await openBlobStore(options.storage ?? `fs:${join(dataDir, 'blocks')}`);
      closers.push(() => store.close());
      const index = BlockIndex.open({ path: join(dataDir, 'index') });
      closers.push(() => index.close());
      const policy: PolicyStore = options.redisUrl
        ? await RedisPolicyStore.open({ url: options.redisUrl })
        : await LmdbPolicyStore.open({ path: join(dataDir, 'policy') });
      closers.push(() => policy.close());
      const statsStore = await openStatsStore({ dataDir, redisUrl: options.redisUrl, connect: createRedisClient });
      closers.push(() => statsStore.close());
      // No timer: this process flushes when a command asks for figures or changes blocks.
      // The cluster's records (Redis with --redis-url, else <dataDir>/plane): purge sweeps them, stats read stored bytes from them.
      const plane = await openMetadataPlane({ dataDir, redisUrl: options.redisUrl ?? '' });
      closers.push(() => plane.close());
      const recorder = new StatsRecorder({ store: statsStore, sampleTier: async () => ({ cache: null, usage: await plane.usage() }) });
      const blocks = await BlockAdmin.create({ index, store, plane, policy: () => policy.current(), clock: systemClock });
      const service = new AdminService({ blocks, policy, recorder, pricing: loadPricing(process.env) });
      return new LocalAdmin(service, closers, dataDir);
    } catch (error) {
      await closeAll();
      throw error;
    }
  }

  getPolicy(): Promise<RetentionPolicyDoc> {
    return this.service.getPolicy();
  }

  editPolicy(edit: PolicyEdit): Promise<PolicyEditResult> {
    return this.service.editPolicy(edit);
  }

  overview(): Promise<OverviewResponse> {
    return this.service.overview();
  }

  async listBlocks(filter: BlockFilter & { limit: number }): Promise<BlockListing> {
    return this.service.blocks.list(filter);
  }

  inspectBlock(key: string): Promise<BlockDetail> {
    return this.service.blocks.inspect(key);
  }

  purge(filter: PurgeFilter, onProgress: (progress: AdminProgress) => void): Promise<PurgeReport> {
    return this.service.purge(filter, onProgress);
  }

  gc(options: { dryRun: boolean }, onProgress: (progress: AdminProgress) => void): Promise<GcReport> {
    return this.service.gc(options, onProgress);
  }

  async close(): Promise<void> {
    for (const close of this.closers.reverse()) await close();
  }
}
