/**
 * One GC runner process for sharded-gc.test.ts:
 *   node --import tsx sharded-gc-child.ts <clusterAddress> <keyPrefix> <storeDir> <dataDir> <nowMs> <owner> <holdAfter>
 * Opens the 4-shard plane, runs `runShardedGc` (lease TTL 1 s) and collects each shard it takes with
 * runGc on that shard alone, printing {"ran": shard, "removed": n} per shard; after `holdAfter` shards
 * it prints {"holding": [...]} and waits forever, its leases held (renewed) until it is killed.
 */
import { join } from 'node:path';

import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { runShardedGc } from '../../../src/cluster/index.ts';
import { BlockIndex, createRedisClient, ManualClock, RetentionPolicy, defaultPolicyDoc, runGc } from '../../../src/kvtier/index.ts';
import { RedisMetadataPlane } from '../../../src/kvtier/metadata/index.ts';

const [address, keyPrefix, storeDir, dataDir, nowText, owner, holdText] = process.argv.slice(2);
const out = (value: unknown): void => void process.stdout.write(JSON.stringify(value) + '\n');
const plane = await RedisMetadataPlane.open({ url: address, keyPrefix, shards: 4 });
const store = await FsBlobStore.open({ dir: storeDir });
const index = BlockIndex.open({ path: join(dataDir, 'index') });
const redis = createRedisClient(address);
const policy = new RetentionPolicy(defaultPolicyDoc());
const clock = new ManualClock(Number(nowText));
const ran: number[] = [];
await runShardedGc({ redis, owner, shards: 4, ttlMs: 1000 }, async (shard, signal) => {
  const report = await runGc({ plane, index, store, policy, clock }, { shards: [shard], signal, sweepOrphans: false });
  ran.push(shard);
  out({ ran: shard, removed: report.removed.expired.blocks });
  if (ran.length >= Number(holdText)) {
    out({ holding: ran });
    await new Promise(() => undefined);
  }
  return report;
});
