import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { afterAll, describe, expect, it } from 'vitest';

import { loadAddon } from '../../../native/index.ts';
import { FsBlobStore } from '../../../storage-adapters/index.ts';
import { useNativeFsBatches } from '../../../src/kvtier/fs-batch-writer.ts';
import { collect, expectSameBytes, runBlobStoreConformance } from '../../storage-adapters/blob-store-conformance.ts';

const scratchDirs: string[] = [];
async function scratchDir(): Promise<string> {
  const dir = await fsp.mkdtemp(join(tmpdir(), 'kvtier-fs-batch-'));
  scratchDirs.push(dir);
  return dir;
}
afterAll(async () => {
  for (const dir of scratchDirs) await fsp.rm(dir, { recursive: true, force: true });
});

async function batchedStore(dir: string, fsync = false): Promise<FsBlobStore> {
  const store = await FsBlobStore.open({ dir, fsync });
  expect(useNativeFsBatches(store)).toBe(true);
  return store;
}

async function filesUnder(dir: string): Promise<string[]> {
  const entries = await fsp.readdir(dir, { recursive: true, withFileTypes: true });
  return entries.filter((entry) => entry.isFile()).map((entry) => entry.name);
}

runBlobStoreConformance('fs with native batched puts', async () => {
  const dir = await scratchDir();
  return { open: async () => batchedStore(join(dir, 'store')), dispose: () => fsp.rm(dir, { recursive: true, force: true }) };
});

describe('fs store, native batched puts', () => {
  it('writes puts started in one turn as whole files in new shard directories, no temp files left', async () => {
    const dir = join(await scratchDir(), 'store');
    const store = await batchedStore(dir, true);
    const values = new Map<string, Uint8Array>();
    for (let i = 0; i < 100; i++) values.set(`${(i * 2654435761 >>> 0).toString(16).padStart(8, '0')}k${i}`, new Uint8Array(3000 + i).fill(i));
    await Promise.all([...values].map(([key, bytes]) => store.put(key, bytes)));
    for (const [key, bytes] of values) expectSameBytes(await store.get(key), bytes);
    expect((await collect(store.list())).sort()).toEqual([...values.keys()].sort());
    expect((await filesUnder(dir)).filter((name) => name.includes('~'))).toEqual([]);
    await store.close();
  });

  it('a file the writer could not write goes through the one-file path (same result)', async () => {
    const dir = join(await scratchDir(), 'store');
    const store = await FsBlobStore.open({ dir });
    const calls: number[] = [];
    // Every file refused with EEXIST (a recycled temp name): each put must still land.
    store.useBatchWriter(async (finals) => {
      calls.push(finals.length);
      return new Int32Array(finals.length).fill(17);
    });
    await Promise.all(['aa01', 'bb02', 'cc03'].map((key, i) => store.put(key, new Uint8Array([i, i, i]))));
    expect(calls).toEqual([3]);
    for (const [i, key] of ['aa01', 'bb02', 'cc03'].entries()) expectSameBytes(await store.get(key), new Uint8Array([i, i, i]));
    await store.close();
  });

  it('the native writer reports each file by errno: an existing temp name, a missing root', async () => {
    const addon = loadAddon();
    const dir = await scratchDir();
    await fsp.writeFile(join(dir, 'taken~t'), 'x');
    const errnos = await addon.writeFilesAtomic!(
      [join(dir, 'ok'), join(dir, 'taken'), '/proc/kvtier-no/such/dir/x'],
      [join(dir, 'ok~t'), join(dir, 'taken~t'), '/proc/kvtier-no/such/dir/x~t'],
      [new Uint8Array([1, 2, 3]), new Uint8Array([4]), new Uint8Array([5])],
      false,
    );
    expect(errnos[0]).toBe(0);
    expect(errnos[1]).toBe(17); // EEXIST
    expect(errnos[2]).not.toBe(0);
    expect([...(await fsp.readFile(join(dir, 'ok')))]).toEqual([1, 2, 3]);
    await expect(fsp.stat(join(dir, 'taken'))).rejects.toMatchObject({ code: 'ENOENT' });
    expect(await fsp.readFile(join(dir, 'taken~t'), 'utf8')).toBe('x');
  });
});
