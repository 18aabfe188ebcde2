/**
 * S3BlobStore against a real S3 server: a Ceph cluster (mon + memstore OSD +
 * radosgw) started on loopback for this file, or — when KVTIER_TEST_S3_* are
 * set — the external endpoint they name (see storage-adapters/README.md).
 */
import { randomUUID } from 'node:crypto';

import { afterAll, beforeAll, describe, expect, it } from 'vitest';

import { S3BlobStore, openBlobStore, type S3BlobStoreOptions } from '../../storage-adapters/index.ts';
import { s3StoreOptions, startCephS3, wipeS3Prefix, type CephS3 } from '../helpers/ceph-s3.ts';
import { collect, expectSameBytes, runBlobStoreConformance } from './blob-store-conformance.ts';
import { freePort as closedPort } from '../helpers/free-port.ts';

interface Target {
  endpoint: string;
  bucket: string;
  region: string;
  accessKeyId: string;
  secretAccessKey: string;
  external: boolean;
}

const externalEnv = process.env.KVTIER_TEST_S3_ENDPOINT;
let cluster: CephS3 | undefined;
let target: Target;
const runId = randomUUID().slice(0, 8);

beforeAll(async () => {
  if (externalEnv) {
    const need = (name: string) => {
      const value = process.env[name];
      if (!value) throw new Error(`KVTIER_TEST_S3_ENDPOINT is set, so ${name} must be set too`);
      return value;
    };
    target = {
      endpoint: externalEnv,
      bucket: need('KVTIER_TEST_S3_BUCKET'),
      region: process.env.KVTIER_TEST_S3_REGION ?? 'us-east-1',
      accessKeyId: need('KVTIER_TEST_S3_ACCESS_KEY_ID'),
      secretAccessKey: need('KVTIER_TEST_S3_SECRET_ACCESS_KEY'),
      external: true,
    };
  } else {
    cluster = await startCephS3();
    target = { ...cluster, bucket: 'kvtier-test', external: false };
  }
  // external buckets must exist already; the test cluster's is made here
  const store = await S3BlobStore.open({ ...storeOptions(`kvtier-tests/${runId}/setup`), createBucket: !target.external });
  await store.close();
});

afterAll(async () => {
  await cluster?.stop();
});

function storeOptions(prefix: string, extra: Partial<S3BlobStoreOptions> = {}): S3BlobStoreOptions {
  return { ...s3StoreOptions(target, target.bucket, prefix), ...extra };
}

runBlobStoreConformance('s3', async () => {
  const prefix = `kvtier-tests/${runId}/${randomUUID().slice(0, 8)}`;
  return {
    open: () => S3BlobStore.open(storeOptions(prefix)),
    dispose: () => wipeS3Prefix(storeOptions(prefix)),
  };
});

describe('S3BlobStore requests', () => {
  it('has() runs HeadObject in parallel, never more than `concurrency` at once', async () => {
    const prefix = `kvtier-tests/${runId}/parallel-has`;
    const store = new S3BlobStore(storeOptions(prefix, { concurrency: 8 }));
    const heads = countInFlight(store, 'HeadObjectCommand');
    const keys = Array.from({ length: 200 }, (_, i) => `p${i}`);
    await store.put('p7', Uint8Array.of(7));
    const present = await store.has(keys);
    expect(present.filter(Boolean)).toHaveLength(1);
    expect(present[7]).toBe(true);
    expect(heads.calls).toBe(200);
    expect(heads.maxInFlight).toBeGreaterThan(1);
    expect(heads.maxInFlight).toBeLessThanOrEqual(8);
    await store.delete(['p7']);
    await store.close();
  });

  it('delete() sends DeleteObjects in batches of at most 1000 keys', async () => {
    const store = new S3BlobStore(storeOptions(`kvtier-tests/${runId}/batched-delete`));
    const batches: number[] = [];
    store.client.middlewareStack.add(
      (next, context) => async (args) => {
        if (context.commandName === 'DeleteObjectsCommand') {
          batches.push((args.input as { Delete: { Objects: unknown[] } }).Delete.Objects.length);
        }
        return next(args);
      },
      { step: 'initialize', name: 'countDeleteBatches' },
    );
    await store.delete(Array.from({ length: 2500 }, (_, i) => `gone-${i}`));
    expect(batches.sort((a, b) => b - a)).toEqual([1000, 1000, 500]);
    await store.close();
  });

  it('list() under a prefix skips objects of deeper prefixes', async () => {
    const base = `kvtier-tests/${runId}/nested`;
    const outer = new S3BlobStore(storeOptions(base));
    const inner = new S3BlobStore(storeOptions(`${base}/inner`));
    await outer.put('top', Uint8Array.of(1));
    await inner.put('deep', Uint8Array.of(2));
    expect(await collect(outer.list())).toEqual(['top']);
    expect(await collect(inner.list())).toEqual(['deep']);
    await outer.delete(['top']);
    await inner.delete(['deep']);
    await Promise.all([outer.close(), inner.close()]);
  });

  it('openBlobStore() opens an s3:// URL with credentials from the URL or from AWS_* variables', async () => {
    const prefix = `kvtier-tests/${runId}/by-url`;
    const query = `endpoint=${encodeURIComponent(target.endpoint)}&region=${target.region}&forcePathStyle=true`;
    const withKeys = await openBlobStore(
      `s3://${target.bucket}/${prefix}?${query}&accessKeyId=${encodeURIComponent(target.accessKeyId)}&secretAccessKey=${encodeURIComponent(target.secretAccessKey)}`,
    );
    await withKeys.put('via-url', Uint8Array.of(4, 2));
    const withEnv = await openBlobStore(`s3://${target.bucket}/${prefix}?${query}`, {
      s3: { env: { AWS_ACCESS_KEY_ID: target.accessKeyId, AWS_SECRET_ACCESS_KEY: target.secretAccessKey } },
    });
    expect(withEnv.kind).toBe('s3');
    expectSameBytes(await withEnv.get('via-url'), Uint8Array.of(4, 2));
    await withEnv.delete(['via-url']);
    await Promise.all([withKeys.close(), withEnv.close()]);
  });
});

describe('S3BlobStore faults', () => {
  it('an endpoint with nothing listening gives KVT_ERR_STORAGE_UNREACHABLE', async () => {
    const port = await closedPort();
    const options: S3BlobStoreOptions = {
      endpoint: `http://127.0.0.1:${port}`,
      bucket: 'nowhere',
      credentials: { accessKeyId: 'x', secretAccessKey: 'y' },
      maxAttempts: 1,
      connectionTimeoutMs: 500,
      requestTimeoutMs: 1000,
    };
    await expect(S3BlobStore.open(options)).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    const store = new S3BlobStore(options);
    await expect(store.get('k1')).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    await expect(store.put('k1', Uint8Array.of(1))).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    await expect(store.has(['k1', 'k2'])).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    await expect(store.delete(['k1'])).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    await expect(collect(store.list())).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_UNREACHABLE' });
    await store.close();
  });

  it('wrong credentials give KVT_ERR_STORAGE_DENIED', async () => {
    const store = new S3BlobStore(storeOptions(`kvtier-tests/${runId}/denied`, {
      credentials: { accessKeyId: 'KVTNOSUCHKEY0000000', secretAccessKey: 'wrong-secret-wrong-secret-wrong-secret0' },
      maxAttempts: 1,
    }));
    await expect(store.get('k1')).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_DENIED' });
    await expect(store.put('k1', Uint8Array.of(1))).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_DENIED' });
    await store.close();
  });

  it('a bucket that does not exist gives KVT_ERR_STORAGE_NO_BUCKET unless createBucket is set', async () => {
    const bucket = `kvtier-missing-${randomUUID().slice(0, 8)}`;
    const options = { ...storeOptions('p'), bucket };
    await expect(S3BlobStore.open(options)).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_NO_BUCKET', bucket });
    const store = new S3BlobStore(options);
    await expect(store.put('k1', Uint8Array.of(1))).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_NO_BUCKET' });
    await store.close();
    if (target.external) return; // creating buckets on someone else's endpoint is not ours to do
    const created = await S3BlobStore.open({ ...options, createBucket: true });
    await created.put('k1', Uint8Array.of(1));
    expectSameBytes(await created.get('k1'), Uint8Array.of(1));
    // a second opener finds the bucket already there
    const again = await S3BlobStore.open({ ...options, createBucket: true });
    await again.delete(['k1']);
    await Promise.all([created.close(), again.close()]);
  });
});

function countInFlight(store: S3BlobStore, commandName: string): { calls: number; maxInFlight: number } {
  const counter = { calls: 0, maxInFlight: 0 };
  let inFlight = 0;
  store.client.middlewareStack.add(
    (next, context) => async (args) => {
      if (context.commandName !== commandName) return next(args);
      counter.calls++;
      counter.maxInFlight = Math.max(counter.maxInFlight, ++inFlight);
      try {
        return await next(args);
      } finally {
        inFlight--;
      }
    },
    { step: 'initialize', name: `count${commandName}` },
  );
  return counter;
}

/** A loopback port that was just free: bound, then closed, so connecting is refused. */
