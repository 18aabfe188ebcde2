/**
 * The cluster retention suite over S3 (a real Ceph RGW on loopback): the
 * orphan sweep and the rebuild after FLUSHALL list the bucket with ListObjectsV2.
 */
import { randomUUID } from 'node:crypto';

import { afterAll, beforeAll } from 'vitest';

import { S3BlobStore, type S3BlobStoreOptions } from '../../../../storage-adapters/index.ts';
import { RedisMetadataPlane } from '../../../../src/kvtier/index.ts';
import { s3StoreOptions, startCephS3, wipeS3Prefix, type CephS3 } from '../../../helpers/ceph-s3.ts';
import { startRedis, type RedisServer } from '../../../helpers/redis-server.ts';
import { runClusterRetentionSuite } from './cluster-retention-suite.ts';

let cluster: CephS3;
let server: RedisServer;
const bucket = 'kvtier-plane-test';

function options(prefix: string): S3BlobStoreOptions {
  return s3StoreOptions(cluster, bucket, prefix);
}

beforeAll(async () => {
  [cluster, server] = await Promise.all([startCephS3(), startRedis()]);
  const setup = await S3BlobStore.open({ ...options('setup'), createBucket: true });
  await setup.close();
}, 180_000);

afterAll(async () => {
  await server?.stop();
  await cluster?.stop();
});

runClusterRetentionSuite('an S3 store (Ceph RGW), Redis plane', async () => {
  const run = randomUUID().slice(0, 8);
  const prefix = `plane/${run}`;
  return {
    redisUrl: server.url,
    store: () => S3BlobStore.open(options(prefix)),
    plane: () => RedisMetadataPlane.open({ url: server.url, keyPrefix: `${run}:plane:` }),
    policyPrefix: `${run}:`,
    flushable: true,
    dispose: () => wipeS3Prefix(options(prefix)),
  };
});
