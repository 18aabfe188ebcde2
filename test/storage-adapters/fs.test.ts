import { spawn } from 'node:child_process';
import { promises as fsp } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';

import { afterAll, describe, expect, it } from 'vitest';

import { FsBlobStore, openBlobStore } from '../../storage-adapters/index.ts';
import { collect, expectSameBytes, runBlobStoreConformance } from './blob-store-conformance.ts';
import { checkValue } from './fs-child.ts';
import { childArgs } from '../helpers/ts-child.ts';

const here = dirname(fileURLToPath(import.meta.url));
const repoRoot = join(here, '..', '..');
const childScript = join(here, 'fs-child.ts');
const scratchDirs: string[] = [];

async function scratchDir(): Promise<string> {
  const dir = await fsp.mkdtemp(join(tmpdir(), 'kvtier-fs-test-'));
  scratchDirs.push(dir);
  return dir;
}

afterAll(async () => {
  for (const dir of scratchDirs) {
    await fsp.chmod(dir, 0o755).catch(() => undefined);
    await fsp.rm(dir, { recursive: true, force: true });
  }
});

runBlobStoreConformance('fs', async () => {
  const dir = await scratchDir();
  return {
    open: async () => FsBlobStore.open({ dir: join(dir, 'store') }),
    dispose: () => fsp.rm(dir, { recursive: true, force: true }),
  };
});

runBlobStoreConformance('fs with fsync, opened by URL', async () => {
  const dir = await scratchDir();
  return {
    open: () => openBlobStore(`fs:${join(dir, 'store')}?fsync=true`),
    dispose: () => fsp.rm(dir, { recursive: true, force: true }),
  };
}, { manyKeys: 200 });

describe('FsBlobStore layout', () => {
  it('shards by the leading key characters and leaves no temp files behind', async () => {
    const dir = await scratchDir();
    const store = new FsBlobStore({ dir });
    await store.put('3fa9c0de', Uint8Array.of(1));
    await store.put('a', Uint8Array.of(2));
    await store.put('..x', Uint8Array.of(3));
    expect(store.pathOf('3fa9c0de')).toBe(join(dir, '3f', 'a9', '3fa9c0de'));
    expect(await filesUnder(dir)).toEqual(['3f/a9/3fa9c0de', '__/x_/..x', 'a_/__/a'].map((p) => join(...p.split('/'))));
    await store.close();
  });

  it('hides temp files from list and sweeps only stale ones', async () => {
    const dir = await scratchDir();
    const store = new FsBlobStore({ dir });
    await store.put('abcd01', Uint8Array.of(1));
    const shard = join(dir, 'ab', 'cd');
    const stale = join(shard, 'abcd02~deadhost.1.0.1');
    const young = join(shard, 'abcd03~livehost.2.0.1');
    await fsp.writeFile(stale, 'partial');
    await fsp.writeFile(young, 'partial');
    const anHourAgo = new Date(Date.now() - 2 * 3600_000);
    await fsp.utimes(stale, anHourAgo, anHourAgo);
    expect(await collect(store.list('abcd'))).toEqual(['abcd01']);
    expect(await store.removeStaleTempFiles(3600_000)).toBe(1);
    expect((await fsp.readdir(shard)).sort()).toEqual(['abcd01', 'abcd03~livehost.2.0.1']);
    await store.close();
  });
});

describe('FsBlobStore shared by several OS processes', () => {
  it('two processes writing, deleting and reading the same keys never see a torn value', async () => {
    const dir = await scratchDir();
    const [a, b] = await Promise.all([runChild(['hammer', dir, '1', '400', '30000']), runChild(['hammer', dir, '2', '400', '30000'])]);
    for (const stats of [a, b]) {
      expect(stats.firstTorn).toBeNull();
      expect(stats.torn).toBe(0);
      expect(stats.writes).toBeGreaterThan(0);
      expect(stats.reads).toBeGreaterThan(0);
      // each process read at least one value the other one wrote
      expect(stats.foreign).toBeGreaterThan(0);
    }
    const store = new FsBlobStore({ dir });
    for (const key of await collect(store.list())) {
      const check = checkValue((await store.get(key))!);
      expect(check, key).toHaveProperty('writerId');
    }
    expect((await filesUnder(dir)).filter((path) => path.includes('~'))).toEqual([]);
    await store.close();
  });
});

describe('FsBlobStore faults', () => {
  it('a directory this process may not write gives KVT_ERR_STORAGE_DENIED', async () => {
    const dir = await scratchDir();
    const readOnly = join(dir, 'read-only');
    await fsp.mkdir(readOnly, { mode: 0o555 });
    await fsp.chmod(dir, 0o755);
    // root ignores permission bits, so as root the probe runs as nobody
    const asNobody = process.getuid?.() === 0 ? { uid: 65534, gid: 65534 } : {};
    const result = await runChild(['put-once', readOnly], asNobody);
    expect(result.code).toBe('KVT_ERR_STORAGE_DENIED');
  });

  it('a store path running through a regular file gives KVT_ERR_STORAGE_IO on put and open', async () => {
    const dir = await scratchDir();
    const file = join(dir, 'not-a-dir');
    await fsp.writeFile(file, 'x');
    const store = new FsBlobStore({ dir: join(file, 'store') });
    await expect(store.put('k1', Uint8Array.of(1))).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
    await expect(FsBlobStore.open({ dir: join(file, 'store') })).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
    await expect(FsBlobStore.open({ dir: file })).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_BAD_CONFIG' });
    await store.close();
  });

  it('a block file that is unreadable is a typed error, not a miss', async () => {
    const dir = await scratchDir();
    const store = new FsBlobStore({ dir });
    // a directory where a block file should be: open() succeeds, read() fails with EISDIR
    await fsp.mkdir(store.pathOf('abcdef'), { recursive: true });
    await expect(store.get('abcdef')).rejects.toMatchObject({ code: 'KVT_ERR_STORAGE_IO' });
    await store.close();
  });

  it('still answers the bytes written before, after another store deletes the shard directories', async () => {
    const dir = await scratchDir();
    const store = new FsBlobStore({ dir });
    await store.put('abcd01', Uint8Array.of(1));
    await fsp.rm(join(dir, 'ab'), { recursive: true });
    expect(await store.get('abcd01')).toBeNull();
    await store.put('abcd01', Uint8Array.of(2));
    expectSameBytes(await store.get('abcd01'), Uint8Array.of(2));
    await store.close();
  });
});

type ChildStats = { writes: number; reads: number; torn: number; foreign: number; firstTorn: string | null; code?: string | null };

function runChild(args: string[], identity: { uid?: number; gid?: number } = {}): Promise<ChildStats> {
  return new Promise((resolvePromise, reject) => {
    const child = spawn(process.execPath, [...childArgs(childScript), ...args], {
      cwd: repoRoot,
      stdio: ['ignore', 'pipe', 'pipe'],
      ...identity,
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (chunk) => (stdout += chunk));
    child.stderr.on('data', (chunk) => (stderr += chunk));
    child.on('error', reject);
    child.on('close', (code) => {
      if (code !== 0) reject(new Error(`fs-child ${args.join(' ')} exited ${code}: ${stderr}`));
      else resolvePromise(JSON.parse(stdout) as ChildStats);
    });
  });
}

async function filesUnder(root: string): Promise<string[]> {
  const out: string[] = [];
  async function walk(dir: string): Promise<void> {
    for (const entry of await fsp.readdir(dir, { withFileTypes: true })) {
      const path = join(dir, entry.name);
      if (entry.isDirectory()) await walk(path);
      else out.push(relative(root, path));
    }
  }
  await walk(root);
  return out.sort();
}
