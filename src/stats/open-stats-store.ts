import { join } from 'node:path';

import { LmdbStatsStore, RedisStatsStore, type RedisConnect, type StatsStore, type StatsStoreOptions } from './stats-store.ts';

/** Redis when a URL is given (every node shares it), else LMDB under `<dataDir>/stats`. */
export async function openStatsStore(options: StatsStoreOptions & { dataDir: string; redisUrl?: string | null; connect?: RedisConnect }): Promise<StatsStore> {
  if (options.redisUrl) return RedisStatsStore.open({ ...options, url: options.redisUrl });
  return LmdbStatsStore.open({ ...options, path: join(options.dataDir, 'stats') });
}
