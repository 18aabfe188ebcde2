/**
 * One kvtier node process for the cluster GC tests:
 *   tsx gc-child.ts fill  <storeDir> <dataDir> <oldPrompts> <freshPrompts>
 *       stores 8-block prompts; the old ones with a clock 10 days back (expired
 *       under the 7-day chat TTL), the fresh ones now. Prints {"written": n}.
 *   tsx gc-child.ts gc    <storeDir> <dataDir> <redisUrl> <owner> <deleteDelayMs | hold:<key>>
 *       runs runExclusiveGc in batches of 4; storage deletes wait deleteDelayMs
 *       first (a slow shared store, so a run lasts long enough to overlap or be
 *       killed). With hold:<key>, the first batch's delete runs and the rest wait
 *       until the test pushes to the Redis list <key> (an event, so the run is
 *       surely still going when another node tries, however slow the machine).
 *       Prints one {"progress": …} line per batch, then {"result": …}.
 *   tsx gc-child.ts check <storeDir> <dataDir>
 *       prints index keys vs storage keys.
 */
import { setTimeout as sleep } from 'node:timers/promises';
import { join } from 'node:path';

import { Redis } from 'ioredis';

import { FsBlobStore, type BlobStore } from '../../../storage-adapters/index.ts';
import { runExclusiveGc } from '../../../src/cluster/index.ts';
import { BlockIndex, KvTier, ManualClock } from '../../../src/kvtier/index.ts';
import { LAYOUT, payloadFor, tokensOf } from '../kvtier/fixtures.ts';

const [mode, storeDir, dataDir, ...rest] = process.argv.slice(2);
const BLOCKS_PER_PROMPT = 8;
const DAY_MS = 86_400_000;
const out = (value: unknown): void => void process.stdout.write(JSON.stringify(value) + '\n');

/** A real FsBlobStore whose deletes wait first: a slow shared mount, or one held until `release` settles (after the first delete). */
function slowDeletes(store: BlobStore, delayMs: number, release?: () => Promise<unknown>): BlobStore {
  let deletes = 0;
  return new Proxy(store, {
    get(target, property, receiver) {
      if (property === 'delete') return async (keys: string[]) => (await (release && deletes++ > 0 ? release() : sleep(delayMs)), target.delete(keys));
      const value = Reflect.get(target, property, receiver) as unknown;
      return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
    },
  });
}

if (mode === 'fill') {
  const [oldPrompts, freshPrompts] = rest.map(Number);
  const store = await FsBlobStore.open({ dir: storeDir });
  const clock = new ManualClock(Date.now() - 10 * DAY_MS);
  const tier = await KvTier.open({ dataDir, store, clock });
  const ns = tier.namespace({ modelFingerprint: 'cluster-gc-fp', tenantSalt: 'acme' });
  const storePrompt = (seed: number) =>
    tier.store({
      namespace: ns,
      tokens: tokensOf(BLOCKS_PER_PROMPT * 64, seed),
      layout: LAYOUT,
      tenant: 'acme',
      trafficClass: 'chat',
      payloads: Array.from({ length: BLOCKS_PER_PROMPT }, (_, b) => payloadFor(seed, b)),
    });
  for (let p = 0; p < oldPrompts; p++) storePrompt(1000 + p);
  await tier.flush();
  clock.advance(10 * DAY_MS);
  for (let p = 0; p < freshPrompts; p++) storePrompt(5000 + p);
  await tier.flush();
  out({ written: tier.stats().blocksWritten });
  await tier.close();
  await store.close();
} else if (mode === 'gc') {
  const [redisUrl, owner, delayText] = rest;
  const holdKey = delayText.startsWith('hold:') ? delayText.slice('hold:'.length) : null;
  const blocking = holdKey ? new Redis(redisUrl) : null;
  let released: Promise<unknown> | undefined;
  const release = holdKey ? () => (released ??= blocking!.blpop(holdKey, 0)) : undefined;
  const store = slowDeletes(await FsBlobStore.open({ dir: storeDir }), holdKey ? 0 : Number(delayText), release);
  const tier = await KvTier.open({ dataDir, store });
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  const result = await runExclusiveGc({ redis, owner, ttlMs: 1500 }, (signal) =>
    tier.gc({ batchSize: 4, signal, onProgress: (progress) => out({ progress }) }),
  );
  out({ result: result.status === 'skipped' ? result : { status: result.status, owner: result.owner, removed: result.report.removed, aborted: result.report.aborted } });
  redis.disconnect();
  blocking?.disconnect();
  await tier.close();
  await store.close();
} else if (mode === 'check') {
  const store = await FsBlobStore.open({ dir: storeDir });
  const storage: string[] = [];
  for await (const key of store.list()) storage.push(key);
  await store.close();
  const index = BlockIndex.open({ path: join(dataDir, 'index') });
  const now = Date.now();
  const entries = [...index.allEntries()];
  await index.close();
  out({
    storage: storage.sort(),
    index: entries.map((e) => e.key).sort(),
    expiredInIndex: entries.filter((e) => e.lastUseAt < now - 7 * DAY_MS).length,
  });
} else {
  throw new Error(`unknown mode ${mode}: use fill | gc | check`);
}
