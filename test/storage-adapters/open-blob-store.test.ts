import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';

import { describe, expect, it } from 'vitest';

import { FsBlobStore, StorageBadUrlError, openBlobStore, parseBlobStoreUrl } from '../../storage-adapters/index.ts';

describe('parseBlobStoreUrl', () => {
  it('reads fs URLs, file URLs and plain paths', () => {
    expect(parseBlobStoreUrl('fs:/mnt/3fs/kv')).toEqual({ kind: 'fs', options: { dir: '/mnt/3fs/kv' } });
    expect(parseBlobStoreUrl('fs:///mnt/3fs/kv')).toEqual({ kind: 'fs', options: { dir: '/mnt/3fs/kv' } });
    expect(parseBlobStoreUrl('fs:./data/blocks?fsync=true&concurrency=8')).toEqual({
      kind: 'fs',
      options: { dir: resolve('data/blocks'), fsync: true, concurrency: 8 },
    });
    expect(parseBlobStoreUrl('file:///var/kv')).toEqual({ kind: 'fs', options: { dir: '/var/kv' } });
    expect(parseBlobStoreUrl('./data')).toEqual({ kind: 'fs', options: { dir: resolve('data') } });
    expect(parseBlobStoreUrl('/abs/dir')).toEqual({ kind: 'fs', options: { dir: '/abs/dir' } });
  });

  it('reads s3 URLs with every option', () => {
    expect(
      parseBlobStoreUrl(
        's3://kv-cache/tier/one?endpoint=http://127.0.0.1:7480&region=eu-west-1&forcePathStyle=false&createBucket=true&concurrency=16&accessKeyId=AK&secretAccessKey=S%2FK',
      ),
    ).toEqual({
      kind: 's3',
      options: {
        bucket: 'kv-cache',
        prefix: 'tier/one',
        endpoint: 'http://127.0.0.1:7480',
        region: 'eu-west-1',
        forcePathStyle: false,
        createBucket: true,
        concurrency: 16,
        credentials: { accessKeyId: 'AK', secretAccessKey: 'S/K' },
      },
    });
    expect(parseBlobStoreUrl('s3://kv-cache')).toEqual({ kind: 's3', options: { bucket: 'kv-cache' } });
  });

  const bad: [string, string][] = [
    ['', 'url'],
    ['gs://bucket/x', 'scheme'],
    ['fs:', 'path'],
    ['fs:/x?fsync=maybe', 'fsync'],
    ['fs:/x?concurrency=0', 'concurrency'],
    ['fs:/x?colour=blue', 'colour'],
    ['s3://B_ad/x', 'bucket'],
    ['s3://ab/x', 'bucket'],
    ['s3://host:9000/x', 'bucket'],
    ['s3://bucket//x', 'prefix'],
    ['s3://bucket/x?endpoint=127.0.0.1:7480', 'endpoint'],
    ['s3://bucket/x?endpoint=ftp://h', 'endpoint'],
    ['s3://bucket/x?region=US%20East', 'region'],
    ['s3://bucket/x?forcePathStyle=yes', 'forcePathStyle'],
    ['s3://bucket/x?accessKeyId=AK', 'secretAccessKey'],
    ['s3://bucket/x?secretAccessKey=SK', 'accessKeyId'],
    ['s3://bucket/x?bucket=other', 'bucket'],
  ];
  it.each(bad)('%j is a KVT_ERR_STORAGE_BAD_URL naming %s', (url, field) => {
    let caught: unknown;
    try {
      parseBlobStoreUrl(url);
    } catch (error) {
      caught = error;
    }
    expect(caught).toBeInstanceOf(StorageBadUrlError);
    expect(caught).toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_URL', field });
  });

  it('never repeats a secret in an error message', () => {
    expect(() => parseBlobStoreUrl('s3://bucket/x?secretAccessKey=hunter2&colour=1')).toThrow(/secretAccessKey=\*\*\*/);
    expect(() => parseBlobStoreUrl('s3://bucket/x?secretAccessKey=hunter2&colour=1')).not.toThrow(/hunter2/);
  });
});

describe('openBlobStore', () => {
  it('opens an fs store and creates its directory', async () => {
    const dir = await fsp.mkdtemp(join(tmpdir(), 'kvtier-open-'));
    const store = await openBlobStore(`fs:${join(dir, 'blocks')}`, { fs: { fsync: true } });
    expect(store).toBeInstanceOf(FsBlobStore);
    expect(store.location).toBe(join(dir, 'blocks'));
    expect((await fsp.stat(join(dir, 'blocks'))).isDirectory()).toBe(true);
    await store.close();
    await fsp.rm(dir, { recursive: true, force: true });
  });
});
