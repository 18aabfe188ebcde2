/**
 * The index and plane records of landed block writes, batched: blocks whose
 * blob puts finish in the same turn of the event loop, or while the previous
 * batch is being recorded, are recorded in one index transaction (scope
 * counters moved once) and one plane call, instead of one of each per block.
 * A write's promise resolves once its batch is recorded, so "written" still
 * means "in the index and the plane" for `flush`, lookups and GC.
 * `recordBatchMax` 1 records each block alone (the old path; the replay
 * bench's baseline).
 */
import type { IndexWrite } from './block-index-records.ts';
import type { PlaneWrite } from './plane-link.ts';
import type { TierCore } from './tier-core.ts';

export interface LandedWrite {
  key: string;
  /** `at` set on both: the block's last use (its store call's time, or a later hit's while it was written). */
  index: IndexWrite & { at: number };
  plane: PlaneWrite & { at: number };
}

/** The writes gathered for one batch, and the one promise all of them wait on. */
interface PendingBatch {
  writes: LandedWrite[];
  done: Promise<void>;
  resolve: () => void;
}

export class WriteRecords {
  private pending: PendingBatch | null = null;
  /** Batches handed to the index and the plane and not yet recorded. */
  private recording = 0;

  constructor(
    private readonly core: TierCore,
    private readonly maxBatch: number,
  ) {}

  /** Resolves once `write` is in the index and the plane (or its failure was noted); never rejects. */
  record(write: LandedWrite): Promise<void> {
    if (this.maxBatch <= 1) return this.recordBatch([write]);
    let batch = this.pending;
    if (batch === null) {
      // One promise per batch, not one per block: the writes of a batch are recorded together, so they settle together.
      let resolve!: () => void;
      const done = new Promise<void>((r) => (resolve = r));
      batch = this.pending = { writes: [], done, resolve };
      // Group commit: while a batch is being recorded, writes that land gather for the next one, sent when it is done
      // (or full), instead of one transaction per event-loop turn each (a served node's turns hold a request's blocks).
      if (this.recording === 0) {
        setImmediate(() => {
          if (this.pending === batch && this.recording === 0) this.flushPending();
        });
      }
    }
    batch.writes.push(write);
    if (batch.writes.length >= this.maxBatch) this.flushPending();
    return batch.done;
  }

  private flushPending(): void {
    const batch = this.pending;
    if (batch === null) return;
    this.pending = null;
    this.recording++;
    // recordBatch notes its failures and never rejects.
    void this.recordBatch(batch.writes).then(() => {
      batch.resolve();
      if (--this.recording === 0) this.flushPending();
    });
  }

  private async recordBatch(batch: readonly LandedWrite[]): Promise<void> {
    const core = this.core;
    try {
      await core.index.recordWrites(
        batch.map((write) => write.index),
        batch[0].index.at,
        core.policy.current(),
      );
      for (const write of batch) core.liveEntries.forget(write.key);
    } catch (error) {
      // The blobs are on storage; a later lookup adopts them.
      core.noteError(error, 'index update after a block write failed');
    }
    await core.planeLink.recordWrites(batch.map((write) => write.plane));
  }
}
