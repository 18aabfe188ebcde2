/**
 * A block write on the fs store: a temp file beside the final path, then a
 * rename, so a reader sees the whole block or nothing (with fsync of the file
 * and its directory when asked). Split from fs-blob-store.ts by concern.
 */
import { promises as fsp } from 'node:fs';
import type { FileHandle } from 'node:fs/promises';
import { join } from 'node:path';

import { fsStorageError, errnoOf } from './fs-faults.ts';
import { writeNewFile } from './fs-fd-io.ts';
import { nextTempSuffix } from './fs-paths.ts';

/** Shard directories this process made or found, so each costs one mkdir instead of a failed open, a mkdir and a retry. */
const SHARD_DIRS_REMEMBERED = 131_072;

export async function putAtomically(finalPath: string, bytes: Uint8Array, fsync: boolean, shardDirs?: Set<string>): Promise<void> {
  const shardDir = join(finalPath, '..');
  if (shardDirs !== undefined && !shardDirs.has(shardDir)) {
    await mkdirShard(shardDir);
    if (shardDirs.size >= SHARD_DIRS_REMEMBERED) shardDirs.clear();
    shardDirs.add(shardDir);
  }
  // ENOENT can come from a missing shard directory (first write there) or,
  // on a shared mount, from another node's cleanup racing ours; retry a few
  // times with the directory re-created.
  for (let attempt = 0; ; attempt++) {
    const tempPath = `${finalPath}${nextTempSuffix()}`;
    try {
      await writeNewFile(tempPath, bytes, fsync);
    } catch (error) {
      if (errnoOf(error) === 'ENOENT' && attempt < 3) {
        await mkdirShard(shardDir);
        continue;
      }
      if (errnoOf(error) === 'EEXIST' && attempt < 3) continue; // a recycled pid on another host; next counter
      throw fsStorageError(error, 'put', tempPath);
    }
    try {
      await fsp.rename(tempPath, finalPath);
    } catch (error) {
      await removeTempAfterFailure(tempPath, error);
      if (errnoOf(error) === 'ENOENT' && attempt < 3) {
        await mkdirShard(shardDir);
        continue;
      }
      throw fsStorageError(error, 'put', finalPath);
    }
    if (fsync) await fsyncDir(shardDir);
    return;
  }
}

/** Best effort: the original failure is what the caller sees; a failed cleanup is attached to it. */
async function removeTempAfterFailure(tempPath: string, failure: unknown): Promise<void> {
  try {
    await fsp.unlink(tempPath);
  } catch (cleanupError) {
    if (errnoOf(cleanupError) !== 'ENOENT' && failure instanceof Error) {
      (failure as Error & { tempCleanupError?: unknown }).tempCleanupError = cleanupError;
    }
  }
}

async function mkdirShard(shardDir: string): Promise<void> {
  try {
    await fsp.mkdir(shardDir, { recursive: true });
  } catch (error) {
    if (errnoOf(error) === 'EEXIST') return;
    throw fsStorageError(error, 'put', shardDir);
  }
}

async function fsyncDir(dir: string): Promise<void> {
  let handle: FileHandle | undefined;
  try {
    handle = await fsp.open(dir, 'r');
    await handle.sync();
  } catch (error) {
    throw fsStorageError(error, 'put (fsync directory)', dir);
  } finally {
    await handle?.close();
  }
}
