/**
 * The KvTier suite over S3: a real Ceph RGW started on loopback for this file
 * (test/helpers/ceph-s3.ts), each test under its own key prefix.
 */
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { S3BlobStore, type S3BlobStoreOptions } from '../../../storage-adapters/index.ts';
import { KvTier } from '../../../src/kvtier/index.ts';
import { s3StoreOptions, startCephS3, wipeS3Prefix, type CephS3 } from '../../helpers/ceph-s3.ts';
import { LAYOUT, captureLogger, payloadFor, tempDir, tokensOf } from './fixtures.ts';
import { runKvTierSuite } from './kv-tier-suite.ts';
import { freePort as closedPort } from '../../helpers/free-port.ts';

let cluster: CephS3;
const bucket = 'kvtier-kvtier-test';
const runId = randomUUID().slice(0, 8);

function options(prefix: string, extra: Partial<S3BlobStoreOptions> = {}): S3BlobStoreOptions {
  return { ...s3StoreOptions(cluster, bucket, prefix), ...extra };
}

beforeAll(async () => {
  cluster = await startCephS3();
  const setup = await S3BlobStore.open({ ...options(`kvtier/${runId}/setup`), createBucket: true });
  await setup.close();
}, 180_000);

afterAll(async () => {
  await cluster?.stop();
});

runKvTierSuite('an S3 store (Ceph RGW)', async () => {
  const prefix = `kvtier/${runId}/${randomUUID().slice(0, 8)}`;
  return {
    open: () => S3BlobStore.open(options(prefix)),
    dispose: () => wipeS3Prefix(options(prefix)),
  };
});

describe('KvTier with an S3 endpoint that is down', () => {
  it('reports misses and counts errors; nothing throws to the caller', async () => {
    const port = await closedPort();
    const dir = await tempDir();
    const logger = captureLogger();
    const store = new S3BlobStore({ ...options('down'), endpoint: `http://127.0.0.1:${port}`, maxAttempts: 1, connectionTimeoutMs: 500 });
    const tier = await KvTier.open({ dataDir: join(dir.path, 'node'), store, logger });
    const scope = { tenant: 'acme', trafficClass: 'chat' };
    const ns = tier.namespace({ modelFingerprint: 'fp', tenantSalt: 'acme' });
    const tokens = tokensOf(64 * 2, 50);
    const result = await tier.lookup(ns, tokens, scope);
    expect(result.hitBlocks).toBe(0);
    tier.store({ namespace: ns, tokens, layout: LAYOUT, ...scope, payloads: [payloadFor(50, 0), payloadFor(50, 1)] });
    await tier.flush();
    const errors = Object.entries(tier.stats().errors).filter(([code]) => code.startsWith('KVT_ERR_STORAGE_'));
    expect(errors.reduce((sum, [, n]) => sum + n, 0)).toBeGreaterThanOrEqual(3);
    expect(tier.stats().blocksWritten).toBe(0);
    await tier.close();
    await store.close();
    await dir.remove();
  });
});

