import fs, { promises as fsp } from 'node:fs';
import { randomBytes } from 'node:crypto';
import { hostname } from 'node:os';
import { resolve } from 'node:path';

import type { BlobStore, GetOptions } from './blob-store.ts';
import { StorageBadConfigError, StorageClosedError, StorageIoError, StorageTooLargeError } from './errors.ts';
import { errnoOf, fsStorageError } from './fs-faults.ts';
import { assertValidKey, assertValidPrefix } from './keys.ts';
import { trackInFlight } from './in-flight.ts';
import { open, readAt, SegmentCatalog, type Entry, type Segment } from './segment-catalog.ts';
import { compactSegments, type CompactOptions, type CompactReport } from './segment-compact.ts';
import { crcOf, headerBytes, KIND_PUT, KIND_TOMBSTONE } from './segment-format.ts';
import { SegmentWriter } from './segment-writer.ts';

export interface SegmentBlobStoreOptions {
  /** Directory of segment files, shared by every node; created by `open`. */
  dir: string;
  /** fdatasync each batch before its puts resolve. Default false (the store is a cache; see FsBlobStore). */
  fsync?: boolean;
  /** A segment is sealed and a new one started past this size. Default 64 MiB. */
  segmentBytes?: number;
  /** Read file descriptors kept open (one per segment read from). Default 256. */
  openSegments?: number;
  /**
   * A get rescans other writers' appends first when the last scan is older
   * than this (ms), so another node's delete or overwrite is seen within it.
   * Default 1000; 0 = before every get (one readdir and a stat per open segment).
   */
  refreshMs?: number;
}

/** An unsealed segment untouched this long is judged abandoned (its writer died) and may be compacted. */
const ABANDONED_MS = 60 * 60 * 1000;

/**
 * Blob store that packs values into append-only segment files on a (possibly
 * shared) POSIX directory: the puts of one event-loop turn are ONE write
 * (segment-writer.ts), against four syscalls and a rename per value for the
 * fs store (bench/RESULTS.md "replay (#29)"). URL: `segment:<dir>`.
 *
 * ```
 * <dir>/<birth>-<writer>.kvseg     records (segment-format.ts) appended by one writer
 * ```
 *
 * Each store keeps every key's location in memory (SegmentCatalog: ~150 B
 * per key), built at open by scanning the segments' headers and kept current
 * by its own appends; a key it does not know (another node's write) makes it
 * scan what other writers appended since (`refresh`), once for a whole
 * `get`/`has`/`delete` call, and `list` always does; a get also rescans when
 * the last scan is older than `refreshMs` (1 s), so another node's delete
 * is seen within it (the fs store: at once). Deletes append
 * tombstones; space comes back when `compact` (kvtier's GC calls it) copies
 * the live records of sealed segments that are mostly dead into a new
 * segment and unlinks them. A reader holding a compacted segment's location
 * finds the file gone, rescans, and reads the copy.
 *
 * Guarantees, as the contract asks: a put is atomic (a record is visible
 * only whole: header CRC, length within the file, value CRC on every read);
 * the last put wins (the higher version: ms × 4096 + counter, so across
 * nodes it is the later clock, as the fs store's last rename; a put or
 * delete of a key this store knows always outranks the record it knows,
 * whatever the clocks say); a corrupt
 * value is KVT_ERR_STORAGE_IO (kvtier: a miss), never other bytes. `fill`
 * is never called (values are not files).
 */
export class SegmentBlobStore implements BlobStore {
  readonly kind = 'segment';
  readonly location: string;
  readonly dir: string;
  private readonly catalog: SegmentCatalog;
  private readonly writer: SegmentWriter;
  private readonly fds = new Map<Segment, { fd: Promise<number>; users: number; doomed: boolean }>();
  private readonly openSegments: number;
  private readonly refreshMs: number;
  private readonly inFlight = new Set<Promise<unknown>>();
  private closed = false;

  constructor(options: SegmentBlobStoreOptions) {
    if (typeof options?.dir !== 'string' || options.dir.length === 0) {
      throw new StorageBadConfigError('dir', 'SegmentBlobStore needs a directory: new SegmentBlobStore({ dir: "/mnt/3fs/kv" })');
    }
    const segmentBytes = options.segmentBytes ?? 64 << 20;
    if (!Number.isInteger(segmentBytes) || segmentBytes < 4096) throw new StorageBadConfigError('segmentBytes', `segmentBytes must be an integer ≥ 4096, got ${segmentBytes}`);
    this.openSegments = options.openSegments ?? 256;
    if (!Number.isInteger(this.openSegments) || this.openSegments < 1) throw new StorageBadConfigError('openSegments', `openSegments must be a positive integer, got ${options.openSegments}`);
    this.refreshMs = options.refreshMs ?? 1000;
    if (!(this.refreshMs >= 0)) throw new StorageBadConfigError('refreshMs', `refreshMs must be ≥ 0, got ${options.refreshMs}`);
    this.dir = resolve(options.dir);
    this.location = `segment:${this.dir}`;
    this.catalog = new SegmentCatalog(this.dir);
    const writer = `${hostname().toLowerCase().replace(/[^0-9a-z.-]/g, '-').slice(0, 24)}.${process.pid}.${randomBytes(4).toString('hex')}`;
    this.writer = new SegmentWriter(this.catalog, { writer, segmentBytes, fsync: options.fsync ?? false, idleRollMs: ABANDONED_MS / 4 });
  }

  /** Creates the directory and scans the segments already there. */
  static async open(options: SegmentBlobStoreOptions): Promise<SegmentBlobStore> {
    const store = new SegmentBlobStore(options);
    try {
      await fsp.mkdir(store.dir, { recursive: true });
      if (!(await fsp.stat(store.dir)).isDirectory()) throw new StorageBadConfigError('dir', `${store.dir} is not a directory`);
      await store.catalog.refresh();
    } catch (error) {
      throw fsStorageError(error, 'open', store.dir);
    }
    return store;
  }

  put(key: string, bytes: Uint8Array): Promise<void> {
    if (this.closed) return Promise.reject(new StorageClosedError(this.location));
    try {
      assertValidKey(key);
    } catch (error) {
      return Promise.reject(error);
    }
    // One promise per put, not three (a catch and the in-flight set's): close() need not track puts one by one,
    // as it ends with the writer's close, which writes every append queued before it seals the segment.
    return this.writer.append(KIND_PUT, key, bytes, this.writer.nextVersion(this.catalog.entries.get(key)?.version), (error) => fsStorageError(error, 'put', this.dir));
  }

  get(key: string, options?: GetOptions): Promise<Uint8Array | null> {
    return this.track(async () => {
      assertValidKey(key);
      for (let attempt = 0; attempt < 2; attempt++) {
        const entry = await this.locate(key);
        if (entry === undefined) return null;
        const value = await this.read(key, entry, options);
        if (value !== undefined) return value;
        // The segment went (compacted by another node): the copy is in a newer one.
        this.catalog.markGone(entry.segment);
      }
      return null;
    });
  }

  has(keys: readonly string[]): Promise<boolean[]> {
    return this.track(async () => {
      for (const key of keys) assertValidKey(key);
      if (keys.some((key) => this.catalog.live(key) === undefined)) await this.refreshed();
      return keys.map((key) => this.catalog.live(key) !== undefined);
    });
  }

  delete(keys: readonly string[]): Promise<void> {
    return this.track(async () => {
      for (const key of keys) assertValidKey(key);
      if (keys.some((key) => this.catalog.live(key) === undefined)) await this.refreshed();
      const live = [...new Set(keys)].filter((key) => this.catalog.live(key) !== undefined);
      try {
        await Promise.all(live.map((key) => this.writer.append(KIND_TOMBSTONE, key, null, this.writer.nextVersion(this.catalog.entries.get(key)?.version))));
      } catch (error) {
        throw fsStorageError(error, 'delete', this.dir);
      }
    });
  }

  async *list(prefix = ''): AsyncIterable<string> {
    assertValidPrefix(prefix);
    if (this.closed) throw new StorageClosedError(this.location);
    await this.track(() => this.refreshed());
    const keys: string[] = [];
    for (const key of this.catalog.entries.keys()) if (key.startsWith(prefix) && this.catalog.live(key) !== undefined) keys.push(key);
    yield* keys;
  }

  /** Reclaims the space of deleted and overwritten values (segment-compact.ts); kvtier's GC calls it. */
  compact(options: CompactOptions = {}): Promise<CompactReport> {
    return this.track(async () => {
      await this.refreshed();
      return compactSegments(
        { catalog: this.catalog, writer: this.writer, readValue: (key, entry) => this.read(key, entry, {}), unlink: (segment) => this.unlink(segment) },
        { abandonedMs: ABANDONED_MS, ...options },
      );
    });
  }

  /** Writes what is queued, seals this writer's segment, closes files. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    await this.writer.close().catch(() => {});
    for (const [segment, handle] of this.fds) this.release(segment, handle, true);
  }

  private async locate(key: string): Promise<Entry | undefined> {
    if (Date.now() - this.catalog.refreshedAt > this.refreshMs) await this.refreshed();
    const entry = this.catalog.live(key);
    if (entry !== undefined) return entry;
    await this.refreshed();
    return this.catalog.live(key);
  }

  /** The value, or undefined when its segment is gone. */
  private async read(key: string, entry: Entry, options: GetOptions | undefined): Promise<Uint8Array | undefined> {
    const size = entry.valueLength;
    const maxBytes = options?.maxBytes ?? Number.POSITIVE_INFINITY;
    if (size > maxBytes) throw new StorageTooLargeError(`${this.location} key ${key}`, size, maxBytes);
    let bytes: Uint8Array;
    try {
      bytes = options?.allocate?.(size) ?? new Uint8Array(Buffer.allocUnsafeSlow(size).buffer, 0, size);
      if (bytes.byteLength !== size) throw new RangeError(`allocate(${size}) returned ${bytes.byteLength} bytes`);
    } catch (error) {
      throw new StorageIoError(`${this.location} get ${key}: the caller's buffer for ${size} bytes failed: ${(error as Error).message}`, { cause: error });
    }
    const segment = entry.segment;
    let handle = this.fds.get(segment);
    if (handle === undefined) {
      handle = { fd: open(segment.path), users: 0, doomed: false };
      handle.fd.catch(() => {});
      this.fds.set(segment, handle);
      this.evictFds();
    }
    handle.users++;
    try {
      const fd = await handle.fd;
      const got = size === 0 ? 0 : await readAt(fd, bytes, size, entry.offset + headerBytes(key.length));
      if (got !== size) throw new StorageIoError(`${this.location} get ${key}: ${segment.name} ends ${size - got} bytes into the value (a truncated segment)`);
    } catch (error) {
      // A file that failed once is opened afresh next time.
      this.release(segment, handle, true);
      if (errnoOf(error) === 'ENOENT') return undefined;
      throw fsStorageError(error, 'get', segment.path);
    } finally {
      this.release(segment, handle, false);
    }
    if (crcOf(bytes) !== entry.valueCrc) throw new StorageIoError(`${this.location} get ${key}: the value's CRC-32 in ${segment.name} does not match (damaged on storage); not returned`);
    return bytes;
  }

  private release(segment: Segment, handle: { fd: Promise<number>; users: number; doomed: boolean }, doom: boolean): void {
    if (!doom) handle.users--;
    if (doom && !handle.doomed) {
      handle.doomed = true;
      if (this.fds.get(segment) === handle) this.fds.delete(segment);
    }
    if (handle.doomed && handle.users === 0) handle.fd.then((fd) => fs.close(fd, () => {}), () => {});
  }

  private evictFds(): void {
    for (const [segment, handle] of this.fds) {
      if (this.fds.size <= this.openSegments) return;
      if (handle.users === 0) this.release(segment, handle, true);
    }
  }

  private async unlink(segment: Segment): Promise<void> {
    const handle = this.fds.get(segment);
    if (handle !== undefined) this.release(segment, handle, true);
    try {
      await fsp.unlink(segment.path);
    } catch (error) {
      if (errnoOf(error) !== 'ENOENT') throw fsStorageError(error, 'compact', segment.path);
    }
    this.catalog.markGone(segment);
  }

  private async refreshed(): Promise<void> {
    try {
      await this.catalog.refresh();
    } catch (error) {
      throw fsStorageError(error, 'scan', this.dir);
    }
  }

  private track<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StorageClosedError(this.location));
    return trackInFlight(this.inFlight, operation);
  }
}
