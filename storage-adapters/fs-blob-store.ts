import { promises as fsp, constants as fsConstants } from 'node:fs';
import { join, resolve } from 'node:path';

import type { BlobStore, GetOptions } from './blob-store.ts';
import { readWholeFile } from './fs-fd-io.ts';
import { boundedMap } from './bounded-map.ts';
import { StorageBadConfigError, StorageClosedError } from './errors.ts';
import { fsStorageError, errnoOf } from './fs-faults.ts';
import { putAtomically } from './fs-atomic-write.ts';
import { FsPutBatcher, type FsBatchWriter } from './fs-put-batcher.ts';
import { mapShardChars, shardSegment, TEMP_MARK } from './fs-paths.ts';
import { assertValidKey, assertValidPrefix } from './keys.ts';
import { trackInFlight } from './in-flight.ts';

export interface FsBlobStoreOptions {
  /** Root directory; created on first write (or by `FsBlobStore.open`). */
  dir: string;
  /**
   * fdatasync each block before the rename and fsync its directory after.
   * Default false — see "Durability" on FsBlobStore.
   */
  fsync?: boolean;
  /** Most file operations in flight for one `has`/`delete` call. Default 64. */
  concurrency?: number;
}

/**
 * Blob store on a directory of a (possibly shared) POSIX filesystem: 3FS FUSE,
 * CephFS, NFS, Lustre or a local disk.
 *
 * Layout — two levels of two-character shards taken from the key itself, so
 * `list(prefix)` only walks the shards that can hold the prefix:
 *
 * ```
 * <dir>/3f/a9/3fa9c0…e1                      a block (key 3fa9c0…e1)
 * <dir>/3f/a9/3fa9c0…e1~<host>.<pid>.<tag>.<n>   a write in progress
 * <dir>/a_/__/a                              short keys pad with "_"; "." maps to "_"
 * ```
 *
 * Atomicity: a put writes the whole value to a temp file in the block's own
 * directory (same filesystem, so the rename cannot become a copy) and renames
 * it over the final name. POSIX rename is atomic, so a reader opens either the
 * old inode or the new one, each complete; the fd it holds stays valid even if
 * the name is replaced mid-read. `~` is outside the key alphabet, so temp
 * files never collide with keys and `list` skips them.
 *
 * Many writers, many machines: temp names carry host, pid, a random
 * per-process tag and a counter, and are created with O_EXCL, so two writers
 * never share a temp file. No locks: concurrent puts of one key each rename a
 * whole file and the last rename wins. Shard directories are created on demand
 * with `mkdir -p` semantics and never removed, so a racing `mkdir` (EEXIST)
 * or a racing delete (ENOENT) is expected and tolerated.
 *
 * Durability: by default a put does not fsync — the same as a plain
 * `fs.writeFile`. The store is a cache: a block lost or cut short by a power
 * failure fails kvtier's header/checksum verification and costs a miss, never
 * a wrong answer, and on 3FS/CephFS the data is already replicated when
 * `close` returns. Pass `fsync: true` where a crash-consistent local cache is
 * worth the latency.
 *
 * Crashed writers can leave temp files behind; `removeStaleTempFiles` sweeps
 * them (kvtier's GC calls it).
 */
export class FsBlobStore implements BlobStore {
  readonly kind = 'fs';
  readonly location: string;
  readonly dir: string;
  private readonly fsync: boolean;
  private readonly concurrency: number;
  private closed = false;
  private readonly inFlight = new Set<Promise<unknown>>();
  /** Shard directories known to exist (a removed one is re-made by putAtomically's ENOENT retry). */
  private readonly shardDirs = new Set<string>();
  private batcher: FsPutBatcher | null = null;

  constructor(options: FsBlobStoreOptions) {
    if (typeof options?.dir !== 'string' || options.dir.length === 0) {
      throw new StorageBadConfigError('dir', 'FsBlobStore needs a directory: new FsBlobStore({ dir: "/mnt/3fs/kv" })');
    }
    const concurrency = options.concurrency ?? 64;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new StorageBadConfigError('concurrency', `concurrency must be a positive integer, got ${concurrency}`);
    }
    this.dir = resolve(options.dir);
    this.location = this.dir;
    this.fsync = options.fsync ?? false;
    this.concurrency = concurrency;
  }

  /** Like the constructor, but creates the directory now and fails early if it is unusable. */
  static async open(options: FsBlobStoreOptions): Promise<FsBlobStore> {
    const store = new FsBlobStore(options);
    try {
      try {
        await fsp.mkdir(store.dir, { recursive: true });
      } catch (error) {
        if (errnoOf(error) !== 'EEXIST') throw error; // exists as something else: the stat below says what
      }
      const stat = await fsp.stat(store.dir);
      if (!stat.isDirectory()) {
        throw new StorageBadConfigError('dir', `${store.dir} exists and is not a directory; point the fs store at a directory`);
      }
    } catch (error) {
      throw fsStorageError(error, 'open', store.dir);
    }
    return store;
  }

  /** Where `key` lives: `<dir>/<s0>/<s1>/<key>`. */
  pathOf(key: string): string {
    assertValidKey(key);
    return join(this.dir, shardSegment(key, 0), shardSegment(key, 1), key);
  }

  put(key: string, bytes: Uint8Array): Promise<void> {
    const batcher = this.batcher;
    if (batcher !== null) return this.track(() => batcher.put(this.pathOf(key), bytes));
    return this.track(() => putAtomically(this.pathOf(key), bytes, this.fsync, this.shardDirs));
  }

  /**
   * Puts from now on go in batches through `writer` (fs-put-batcher.ts: one
   * pool job per batch instead of four pool hops per file); null = one file at
   * a time through node:fs. Same atomicity, same errors.
   */
  useBatchWriter(writer: FsBatchWriter | null): void {
    this.batcher = writer === null ? null : new FsPutBatcher(writer, this.fsync, this.shardDirs);
  }

  get(key: string, options?: GetOptions): Promise<Uint8Array | null> {
    return this.track(() => this.getNow(key, options?.allocate, options?.maxBytes, options?.fill));
  }

  has(keys: readonly string[]): Promise<boolean[]> {
    return this.track(async () => {
      const paths = keys.map((key) => this.pathOf(key));
      return boundedMap(paths, this.concurrency, async (path) => {
        try {
          await fsp.access(path, fsConstants.F_OK);
          return true;
        } catch (error) {
          if (errnoOf(error) === 'ENOENT') return false;
          throw fsStorageError(error, 'has', path);
        }
      });
    });
  }

  delete(keys: readonly string[]): Promise<void> {
    return this.track(async () => {
      const paths = keys.map((key) => this.pathOf(key));
      await boundedMap(paths, this.concurrency, async (path) => {
        try {
          await fsp.unlink(path);
        } catch (error) {
          if (errnoOf(error) === 'ENOENT') return;
          throw fsStorageError(error, 'delete', path);
        }
      });
    });
  }

  async *list(prefix = ''): AsyncIterable<string> {
    assertValidPrefix(prefix);
    this.assertOpen();
    for (const level0 of await this.shardsMatching(this.dir, prefix.slice(0, 2))) {
      const dir0 = join(this.dir, level0);
      for (const level1 of await this.shardsMatching(dir0, prefix.slice(2, 4))) {
        const dir1 = join(dir0, level1);
        for (const name of await this.readdirOrEmpty(dir1)) {
          if (name.startsWith(prefix) && !name.includes(TEMP_MARK)) yield name;
        }
      }
    }
  }

  /**
   * Deletes temp files older than `olderThanMs` (left by writers that died
   * between create and rename). Young ones may belong to a put in progress on
   * another machine, so they stay. Returns how many were removed.
   */
  removeStaleTempFiles(olderThanMs = 60 * 60 * 1000): Promise<number> {
    return this.track(async () => {
      const cutoff = Date.now() - olderThanMs;
      let removed = 0;
      for (const level0 of await this.shardsMatching(this.dir, '')) {
        const dir0 = join(this.dir, level0);
        for (const level1 of await this.shardsMatching(dir0, '')) {
          const dir1 = join(dir0, level1);
          for (const name of await this.readdirOrEmpty(dir1)) {
            if (!name.includes(TEMP_MARK)) continue;
            const path = join(dir1, name);
            try {
              const stat = await fsp.lstat(path);
              if (stat.mtimeMs >= cutoff) continue;
              await fsp.unlink(path);
              removed++;
            } catch (error) {
              if (errnoOf(error) === 'ENOENT') continue; // renamed or swept by someone else meanwhile
              throw fsStorageError(error, 'removeStaleTempFiles', path);
            }
          }
        }
      }
      return removed;
    });
  }

  /** Waits for operations in flight, then refuses new ones. Idempotent. */
  async close(): Promise<void> {
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
  }

  private async getNow(key: string, allocate?: (size: number) => Uint8Array, maxBytes?: number, fill?: GetOptions['fill']): Promise<Uint8Array | null> {
    const path = this.pathOf(key);
    try {
      return await readWholeFile(path, allocate, maxBytes, fill);
    } catch (error) {
      throw fsStorageError(error, 'get', path);
    }
  }

  /** Two-character shard directories under `dir` that can hold keys starting with `keyPart`. */
  private async shardsMatching(dir: string, keyPart: string): Promise<string[]> {
    if (keyPart.length === 2) return [mapShardChars(keyPart)];
    const names = await this.readdirOrEmpty(dir);
    const lead = mapShardChars(keyPart);
    return names.filter((name) => name.length === 2 && name.startsWith(lead));
  }

  private async readdirOrEmpty(dir: string): Promise<string[]> {
    this.assertOpen();
    try {
      return await fsp.readdir(dir);
    } catch (error) {
      const errno = errnoOf(error);
      if (errno === 'ENOENT') return []; // shard (or root) not written yet
      throw fsStorageError(error, 'list', dir);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new StorageClosedError(this.location);
  }

  private track<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StorageClosedError(this.location));
    return trackInFlight(this.inFlight, operation);
  }
}
