/**
 * What one segment store knows of the segments on the mount: every segment
 * file (segment-blob-store.ts names them) and, per key, the record that wins.
 * Built by scanning the records' headers (segment-format.ts); kept current by
 * this store's own appends and by `refresh` (a scan of what other writers
 * appended since the last one).
 *
 * Which record wins (the same rule on every node, whatever order it scans in):
 * the higher version; at equal versions (a compaction's copy of a record) the
 * one in the segment born later (then the later name), and any record over
 * one whose segment is gone. A tombstone is an entry too, so a put older
 * than it that is scanned later does not bring the key back.
 */
import fs from 'node:fs';
import { join } from 'node:path';

import { KIND_PUT, KIND_SEALED, readHeader, type RecordHeader } from './segment-format.ts';

/** `<birth: 14 hex>-<writer>.kvseg`; birth is a version (ms × 4096 + counter), so names sort by age. */
const SEGMENT_NAME = /^([0-9a-f]{14})-([0-9a-z._-]+)\.kvseg$/;
const SCAN_CHUNK_BYTES = 1 << 20;

export interface Segment {
  readonly name: string;
  readonly path: string;
  readonly writer: string;
  readonly birth: number;
  /** Bytes of whole records applied (the next record starts here). */
  scanned: number;
  /** The writer appends no more (its sealed record was read, or it is ours and rolled). */
  sealed: boolean;
  /** Deleted (compacted) or found missing: entries in it read as absent. */
  gone: boolean;
  /** Written by this store (never scanned; `scanned` is its size). */
  readonly own: boolean;
  /** The smallest record version in it (a tombstone may be dropped only once no older put can remain). */
  minVersion: number;
  /** Bytes of the put records entries point at. */
  liveBytes: number;
  /** mtime (ms) when last scanned. */
  mtimeMs: number;
}

export interface Entry {
  segment: Segment;
  /** The record's start in the segment. */
  offset: number;
  kind: number;
  size: number;
  valueLength: number;
  valueCrc: number;
  version: number;
}

export function segmentName(birth: number, writer: string): string {
  return `${birth.toString(16).padStart(14, '0')}-${writer}.kvseg`;
}

export class SegmentCatalog {
  readonly segments = new Map<string, Segment>();
  readonly entries = new Map<string, Entry>();
  /** When the last finished scan started (Date.now()); -Infinity before the first. */
  refreshedAt = Number.NEGATIVE_INFINITY;
  private refreshing: Promise<void> | null = null;
  private queued: Promise<void> | null = null;

  constructor(readonly dir: string) {}

  /** The live put record of `key`, if this store knows one. */
  live(key: string): Entry | undefined {
    const entry = this.entries.get(key);
    return entry !== undefined && entry.kind === KIND_PUT && !entry.segment.gone ? entry : undefined;
  }

  addSegment(name: string, own: boolean): Segment | undefined {
    const known = this.segments.get(name);
    if (known !== undefined) return known;
    const match = SEGMENT_NAME.exec(name);
    if (match === null) return undefined;
    const segment: Segment = {
      name,
      path: join(this.dir, name),
      writer: match[2],
      birth: parseInt(match[1], 16),
      scanned: 0,
      sealed: false,
      gone: false,
      own,
      minVersion: Number.POSITIVE_INFINITY,
      liveBytes: 0,
      mtimeMs: Date.now(),
    };
    this.segments.set(name, segment);
    return segment;
  }

  /** Applies one record found at `offset` of `segment` (the winner rule above). */
  apply(segment: Segment, offset: number, header: Pick<RecordHeader, 'kind' | 'key' | 'valueLength' | 'valueCrc' | 'version' | 'size'>): void {
    if (header.kind === KIND_SEALED) {
      segment.sealed = true;
      return;
    }
    segment.minVersion = Math.min(segment.minVersion, header.version);
    const current = this.entries.get(header.key);
    if (current !== undefined && !wins(header.version, segment, offset, current)) return;
    if (current !== undefined && current.kind === KIND_PUT) current.segment.liveBytes -= current.size;
    this.entries.set(header.key, { segment, offset, kind: header.kind, size: header.size, valueLength: header.valueLength, valueCrc: header.valueCrc, version: header.version });
    if (header.kind === KIND_PUT) segment.liveBytes += header.size;
  }

  /** Forgets a key's entry (a tombstone no older put can outlive). */
  drop(key: string, entry: Entry): void {
    if (this.entries.get(key) === entry) this.entries.delete(key);
  }

  markGone(segment: Segment): void {
    segment.gone = true;
    segment.liveBytes = 0;
  }

  /**
   * Scans what other writers appended since the last scan, and notes segments
   * that went. Concurrent calls share a scan; a call made while one runs gets
   * the next one (so it sees every append that finished before it was made).
   */
  refresh(): Promise<void> {
    if (this.refreshing === null) {
      this.refreshing = this.scanAll().finally(() => {
        this.refreshing = null;
      });
      return this.refreshing;
    }
    this.queued ??= this.refreshing.then(
      () => this.startQueued(),
      () => this.startQueued(),
    );
    return this.queued;
  }

  private startQueued(): Promise<void> {
    this.queued = null;
    return this.refresh();
  }

  private async scanAll(): Promise<void> {
    const startedAt = Date.now();
    await this.scanDir();
    this.refreshedAt = startedAt;
  }

  private async scanDir(): Promise<void> {
    let names: string[];
    try {
      names = await fs.promises.readdir(this.dir);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') names = [];
      else throw error;
    }
    const listed = new Set(names);
    for (const segment of this.segments.values()) if (!segment.own && !segment.gone && !listed.has(segment.name)) this.markGone(segment);
    // Oldest first, so a segment's records are usually applied before their compaction copies.
    for (const name of names.sort()) {
      const segment = this.addSegment(name, false);
      if (segment === undefined || segment.own || segment.gone) continue;
      if (segment.sealed && segment.scanned > 0) continue;
      await this.scan(segment);
    }
  }

  /** Applies the whole records past `segment.scanned`; a partial or invalid header ends the scan there (for now). */
  private async scan(segment: Segment): Promise<void> {
    let fd: number;
    try {
      fd = await open(segment.path);
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return this.markGone(segment);
      throw error;
    }
    try {
      const stat = await fstat(fd);
      segment.mtimeMs = stat.mtimeMs;
      const size = stat.size;
      const chunk = Buffer.allocUnsafeSlow(SCAN_CHUNK_BYTES);
      while (segment.scanned < size && !segment.sealed) {
        const start = segment.scanned;
        const got = await readAt(fd, chunk, Math.min(chunk.byteLength, size - start), start);
        const view = chunk.subarray(0, got);
        // A header cut by the chunk's end is read again from its start; a value past it is skipped by its length.
        for (let at = 0; at < got && !segment.sealed; ) {
          const header = readHeader(view, at, size - (start + at));
          if (header === null) break;
          this.apply(segment, start + at, header);
          at += header.size;
          segment.scanned = start + at;
        }
        if (segment.scanned === start) return; // no whole record here: a write still landing, or a torn tail
      }
    } finally {
      fs.close(fd, () => {});
    }
  }
}

function wins(version: number, segment: Segment, offset: number, current: Entry): boolean {
  if (version !== current.version) return version > current.version;
  if (current.segment.gone) return true;
  if (segment === current.segment) return offset > current.offset;
  if (segment.birth !== current.segment.birth) return segment.birth > current.segment.birth;
  return segment.name > current.segment.name;
}

export function open(path: string): Promise<number> {
  return new Promise((resolve, reject) => fs.open(path, 'r', (error, fd) => (error ? reject(error) : resolve(fd))));
}

function fstat(fd: number): Promise<fs.Stats> {
  return new Promise((resolve, reject) => fs.fstat(fd, (error, stat) => (error ? reject(error) : resolve(stat))));
}

/** Reads up to `length` bytes at `position` (short only at the end of the file). */
export async function readAt(fd: number, into: Uint8Array, length: number, position: number): Promise<number> {
  let done = 0;
  while (done < length) {
    const n = await new Promise<number>((resolve, reject) =>
      fs.read(fd, into, done, length - done, position + done, (error, bytesRead) => (error ? reject(error) : resolve(bytesRead))),
    );
    if (n === 0) break;
    done += n;
  }
  return done;
}
