/**
 * A file at a block's path that claims more than any block: a sparse file
 * costs no disk and can say it holds terabytes. Reading it must fail that
 * read with a typed error, never size a buffer to it, never end the process
 * (an allocation failure inside an fs callback was an uncaught exception).
 */
import { closeSync, ftruncateSync, mkdirSync, mkdtempSync, openSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';

import { afterEach, expect, it } from 'vitest';

import { FsBlobStore } from '../../storage-adapters/index.ts';
import { ReadBufferPool } from '../../src/kvtier/read-buffer-pool.ts';

const TIB = 2 ** 40;
const dirs: string[] = [];
afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

async function storeWithSparseBlock(apparentBytes: number): Promise<{ store: FsBlobStore; key: string }> {
  const dir = mkdtempSync(join(tmpdir(), 'kvtier-fs-sparse-'));
  dirs.push(dir);
  const store = await FsBlobStore.open({ dir });
  const key = '3f'.repeat(16);
  const path = store.pathOf(key);
  mkdirSync(dirname(path), { recursive: true });
  const fd = openSync(path, 'w');
  try {
    ftruncateSync(fd, apparentBytes);
  } finally {
    closeSync(fd);
  }
  return { store, key };
}

it('an 8 TiB sparse file read into a load\'s recycled buffers: a typed storage error, nothing allocated, the process goes on', async () => {
  const { store, key } = await storeWithSparseBlock(8 * TIB);
  const pool = new ReadBufferPool(64 << 20);
  // The pool's own bound refuses the size (no ArrayBuffer of 8 TiB is attempted); the fs store turns the throw into a rejection.
  await expect(store.get(key, { allocate: (size) => pool.take(size) })).rejects.toMatchObject({ code: expect.stringMatching(/^KVT_ERR_STORAGE_/) });
  expect(pool.counts.taken).toBe(0);
  await store.close();
});

it('with maxBytes (what a load passes): KVT_ERR_STORAGE_TOO_LARGE naming the size, before allocate is called', async () => {
  const { store, key } = await storeWithSparseBlock(8 * TIB);
  let asked = 0;
  const error = await store.get(key, { allocate: (size) => (asked++, new Uint8Array(size)), maxBytes: 1 << 30 }).catch((e: unknown) => e);
  expect(error).toMatchObject({ code: 'KVT_ERR_STORAGE_TOO_LARGE', sizeBytes: 8 * TIB, maxBytes: 1 << 30 });
  expect(asked).toBe(0);
  await store.close();
});

it('a plain get (no allocate, no maxBytes) of an 8 TiB sparse file: a rejected get, not a crash', async () => {
  // No Node version makes an 8 TiB Buffer: the allocation throws inside the fs callback.
  const { store, key } = await storeWithSparseBlock(8 * TIB);
  await expect(store.get(key)).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
  await store.close();
});
