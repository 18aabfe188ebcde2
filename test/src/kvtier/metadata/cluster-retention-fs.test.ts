import { randomUUID } from 'node:crypto';
import { join } from 'node:path';


import { FsBlobStore } from '../../../../storage-adapters/index.ts';
import { LmdbMetadataPlane, RedisMetadataPlane } from '../../../../src/kvtier/index.ts';
import { startRedis } from '../../../helpers/redis-server.ts';
import { tempDir } from '../fixtures.ts';
import { runClusterRetentionSuite } from './cluster-retention-suite.ts';
import { suiteFixture } from '../../../helpers/suite-fixture.ts';

const server = suiteFixture(() => startRedis(), (s) => s.stop());

runClusterRetentionSuite('an fs store, Redis plane', async () => {
  const dir = await tempDir('kvtier-cluster-fs-');
  const run = randomUUID().slice(0, 8);
  return {
    redisUrl: server().url,
    store: () => FsBlobStore.open({ dir: join(dir.path, 'blocks') }),
    plane: () => RedisMetadataPlane.open({ url: server().url, keyPrefix: `${run}:plane:` }),
    policyPrefix: `${run}:`,
    flushable: true,
    dispose: () => dir.remove(),
  };
});

runClusterRetentionSuite('an fs store, LMDB plane (embedded, two processes on one host)', async () => {
  const dir = await tempDir('kvtier-cluster-lmdb-');
  const run = randomUUID().slice(0, 8);
  return {
    redisUrl: server().url,
    store: () => FsBlobStore.open({ dir: join(dir.path, 'blocks') }),
    plane: () => LmdbMetadataPlane.open({ path: join(dir.path, 'plane') }),
    policyPrefix: `${run}:`,
    flushable: false,
    dispose: () => dir.remove(),
  };
});
