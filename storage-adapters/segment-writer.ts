/**
 * The segment store's appends: records queued in one turn of the event loop
 * (puts, tombstones, compaction copies) go into this writer's active segment
 * as ONE positioned write (one pool hop, one syscall for a request's blocks),
 * batches one after another. A batch's records enter the catalog, and their
 * promises resolve, only once the write returned (with `fsync`, once
 * fdatasync did): a reader never learns of bytes not yet written.
 *
 * Invariants:
 * - Only this writer appends to its segments (the writer id is unique per
 *   open: host, pid, a random tag), so offsets are known without O_APPEND.
 * - A failed write abandons the segment (a torn tail ends every reader's
 *   scan there); the next batch starts a new one.
 * - A segment is sealed (a sealed record) when it reaches `segmentBytes`,
 *   when it has been idle for `idleRollMs` (so a live writer never appends to
 *   a segment another node's compaction could judge abandoned), on `roll`,
 *   and on close.
 */
import fs from 'node:fs';

import type { SegmentCatalog, Segment } from './segment-catalog.ts';
import { segmentName } from './segment-catalog.ts';
import { crcOf, KIND_SEALED, recordBytes, writeRecord } from './segment-format.ts';

export interface SegmentWriterOptions {
  writer: string;
  segmentBytes: number;
  fsync: boolean;
  idleRollMs: number;
}

interface Pending {
  kind: number;
  key: string;
  value: Uint8Array | null;
  version: number;
  size: number;
  crc: number;
  resolve: () => void;
  reject: (error: unknown) => void;
  /** What a failed write rejects with (the store maps it to its StorageError). */
  failure: (error: unknown) => unknown;
}

interface Active {
  segment: Segment;
  fd: number;
  size: number;
  lastAppendMs: number;
}

/** A batch is written at once past this many bytes, without waiting for the turn to end. */
const BATCH_BYTES = 8 << 20;

export class SegmentWriter {
  private active: Active | null = null;
  private pending: Pending[] = [];
  private pendingBytes = 0;
  private scheduled = false;
  private chain: Promise<void> = Promise.resolve();
  private lastVersion = 0;
  private birthFloor = 0;
  private scratch = Buffer.alloc(0);

  constructor(
    private readonly catalog: SegmentCatalog,
    private readonly options: SegmentWriterOptions,
  ) {}

  /**
   * A version above every one this writer gave (ms × 4096 + a counter) and
   * above `over` (the version a put or delete supersedes: another node's
   * clock may run ahead of ours, and a delete must still win over the put).
   */
  nextVersion(over = 0): number {
    const version = Math.max(Date.now() * 4096, this.lastVersion + 1, Math.floor(over) + 1);
    this.lastVersion = version;
    return version;
  }

  /** Queues one record; resolves once it is written and in the catalog; rejects with `failure(error)` when the write fails. */
  append(kind: number, key: string, value: Uint8Array | null, version = this.nextVersion(), failure: (error: unknown) => unknown = asIs): Promise<void> {
    return new Promise<void>((resolve, reject) => {
      const size = recordBytes(key.length, value?.byteLength ?? 0);
      this.pending.push({ kind, key, value, version, size, crc: 0, resolve, reject, failure });
      this.pendingBytes += size;
      if (this.pendingBytes >= BATCH_BYTES) this.flush();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flush();
        });
      }
    });
  }

  /** Seals the active segment; the next append starts one born after `birthAbove` (compaction's copies win ties by birth). */
  roll(birthAbove = 0): Promise<void> {
    this.flush();
    this.birthFloor = Math.max(this.birthFloor, birthAbove + 1);
    return this.enqueue(() => this.seal());
  }

  /** The segment appends go to now, if any. */
  activeSegment(): Segment | undefined {
    return this.active?.segment;
  }

  /** Writes what is queued and seals the active segment. */
  async close(): Promise<void> {
    this.flush();
    await this.enqueue(() => this.seal());
  }

  private flush(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    this.pending = [];
    this.pendingBytes = 0;
    void this.enqueue(() => this.writeBatch(batch));
  }

  private enqueue(step: () => Promise<void>): Promise<void> {
    const next = this.chain.then(step);
    this.chain = next.catch(() => {});
    return next;
  }

  private async writeBatch(batch: Pending[]): Promise<void> {
    const total = batch.reduce((sum, record) => sum + record.size, 0);
    let active: Active;
    try {
      const now = Date.now();
      if (this.active !== null && this.active.size > 0 && (this.active.size + total > this.options.segmentBytes || now - this.active.lastAppendMs > this.options.idleRollMs)) await this.seal();
      active = this.active ?? (await this.start());
      const bytes = this.batchBuffer(total);
      let at = 0;
      for (const record of batch) {
        record.crc = crcOf(record.value);
        at += writeRecord(bytes, at, record.kind, record.key, record.version, record.value, record.crc);
      }
      await writeAt(active.fd, bytes, active.size);
      if (this.options.fsync) await new Promise<void>((resolve, reject) => fs.fdatasync(active.fd, (error) => (error ? reject(error) : resolve())));
    } catch (error) {
      await this.abandon();
      for (const record of batch) record.reject(record.failure(error));
      return;
    }
    let offset = active.size;
    active.size += total;
    active.lastAppendMs = Date.now();
    active.segment.scanned = active.size;
    for (const record of batch) {
      this.catalog.apply(active.segment, offset, { kind: record.kind, key: record.key, valueLength: record.value?.byteLength ?? 0, valueCrc: record.crc, version: record.version, size: record.size });
      offset += record.size;
      record.resolve();
    }
  }

  /**
   * The bytes of one batch, in a buffer kept across batches (batches run one
   * after another: the previous write returned before this one is made)
   * instead of a fresh one per batch: ahead in each of three alternated pairs
   * on the #29 replay (bench/RESULTS.md, "replay (#29): fewer allocations per
   * block"); the process's page-fault count was the same either way. At most
   * 2 × BATCH_BYTES (16 MiB) is kept; a larger batch gets a buffer of its own.
   */
  private batchBuffer(total: number): Buffer {
    if (total > BATCH_BYTES * 2) return Buffer.allocUnsafeSlow(total);
    if (this.scratch.byteLength < total) this.scratch = Buffer.allocUnsafeSlow(Math.max(total, Math.min(this.scratch.byteLength * 2, BATCH_BYTES * 2)));
    return this.scratch.subarray(0, total);
  }

  private async start(): Promise<Active> {
    const birth = Math.max(this.nextVersion(), this.birthFloor);
    this.lastVersion = Math.max(this.lastVersion, birth);
    const name = segmentName(birth, this.options.writer);
    const segment = this.catalog.addSegment(name, true)!;
    const fd = await new Promise<number>((resolve, reject) => fs.open(segment.path, 'wx', (error, fd) => (error ? reject(error) : resolve(fd))));
    this.active = { segment, fd, size: 0, lastAppendMs: Date.now() };
    return this.active;
  }

  /** Appends the sealed record and closes the active segment. */
  private async seal(): Promise<void> {
    const active = this.active;
    if (active === null) return;
    this.active = null;
    try {
      const record = Buffer.alloc(recordBytes(0, 0));
      writeRecord(record, 0, KIND_SEALED, '', this.nextVersion(), null, 0);
      await writeAt(active.fd, record, active.size);
      active.segment.scanned = active.size + record.byteLength;
    } catch {
      // Unsealed: other nodes judge it by its age (SegmentBlobStore.compact's abandonedMs).
    } finally {
      active.segment.sealed = true;
      fs.close(active.fd, () => {});
    }
  }

  private async abandon(): Promise<void> {
    const active = this.active;
    if (active === null) return;
    this.active = null;
    active.segment.sealed = true;
    fs.close(active.fd, () => {});
  }
}

function asIs(error: unknown): unknown {
  return error;
}

function writeAt(fd: number, bytes: Uint8Array, position: number): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    const step = (done: number) =>
      fs.write(fd, bytes, done, bytes.byteLength - done, position + done, (error, written) => {
        if (error) return reject(error);
        if (done + written < bytes.byteLength) return step(done + written);
        resolve();
      });
    step(0);
  });
}
