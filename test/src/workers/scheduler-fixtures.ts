/** The rig both scheduler tests run on: the tiny engine and a real KvTier over an fs block store in a temp dir. */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import type { LoadedEngine } from '../../../inference-core/index.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { KvTierCache } from '../../../src/workers/cache-adapter.ts';
import type { JobEvent } from '../../../src/workers/job.ts';
import { argmax, tinyEngine } from '../../inference-core/engine-fixtures.ts';

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

/** The reply token ids a job streamed. */
export const tokensOf = (events: JobEvent[]): number[] => events.flatMap((e) => (e.type === 'tokens' ? e.ids : []));

/** Greedy reply of the engine alone (one prefill call, then decode): what a batched or speculative reply must equal. */
export function greedyAlone(engine: LoadedEngine, tokens: number[], n: number): number[] {
  const seq = engine.createSequence();
  let logits = seq.prefill(tokens);
  const out: number[] = [];
  for (let i = 0; i < n; i++) {
    out.push(argmax(logits));
    if (i + 1 < n) logits = seq.decode(out[i]);
  }
  seq.free();
  return out;
}

/** The first `blocks` full blocks of `tokens` as a sequence of its own exports them: what the tier must hold. */
export function blocksAlone(engine: LoadedEngine, tokens: number[], blocks: number): Uint8Array[] {
  const seq = engine.createSequence();
  seq.prefill(tokens.slice(0, blocks * BLOCK));
  const out = seq.exportBlocks(0, blocks);
  seq.free();
  return out;
}
