/** The rig both scheduler tests run on: the tiny engine and a real KvTier over an fs block store in a temp dir. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { LoadedEngine } from '../../../inference-core/index.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/workers/cache-adapter.ts';
import { tinyEngine } from '../../inference-core/engine-fixtures.ts';

export const BLOCK = 64;

export interface SchedulerRig {
  engine: LoadedEngine;
  dir: string;
  store: FsBlobStore;
  tier: KvTier;
  cache: KvTierCache;
  close(): Promise<void>;
}

export async function openSchedulerRig(maxBatch: number, tempPrefix: string): Promise<SchedulerRig> {
  const engine = await tinyEngine({ weightType: 'f16', kvDtype: 'f16', poolBytes: 32 * 2 ** 20, maxBatch });
  const dir = mkdtempSync(join(tmpdir(), tempPrefix));
  const store = await FsBlobStore.open({ dir: join(dir, 'blocks') });
  const tier = await KvTier.open({ dataDir: join(dir, 'index'), store, blockTokens: BLOCK, hotCacheBytes: 0 });
  const cache = await KvTierCache.create(tier, engine.kvLayout);
  return {
    engine, dir, store, tier, cache,
    async close() {
      await tier.close();
      await store.close();
      engine.destroy();
      rmSync(dir, { recursive: true, force: true });
    },
  };
}
