/**
 * The index and plane records of landed block writes, batched: blocks whose
 * blob puts finish in the same turn of the event loop are recorded in one
 * index transaction (scope counters moved once) and one plane call, instead
 * of one of each per block. A write's promise resolves once its batch is
 * recorded, so "written" still means "in the index and the plane" for
 * `flush`, lookups and GC. `recordBatchMax` 1 records each block alone (the
 * old path; the replay bench's baseline).
 */
import type { IndexWrite } from './block-index-records.ts';
import type { PlaneWrite } from './plane-link.ts';
import type { TierCore } from './tier-core.ts';

export interface LandedWrite {
  key: string;
  index: IndexWrite;
  plane: PlaneWrite;
  /** The block's last use (its store call's time, or a later hit's while it was written). */
  at: number;
}

export class WriteRecords {
  private pending: LandedWrite[] = [];
  private waiters: Array<() => void> = [];
  private scheduled = false;

  constructor(
    private readonly core: TierCore,
    private readonly maxBatch: number,
  ) {}

  record(write: LandedWrite): Promise<void> {
    if (this.maxBatch <= 1) return this.recordBatch([write]);
    return new Promise<void>((resolve) => {
      this.pending.push(write);
      this.waiters.push(resolve);
      if (this.pending.length >= this.maxBatch) this.flushPending();
      else if (!this.scheduled) {
        this.scheduled = true;
        setImmediate(() => {
          this.scheduled = false;
          this.flushPending();
        });
      }
    });
  }

  private flushPending(): void {
    if (this.pending.length === 0) return;
    const batch = this.pending;
    const waiters = this.waiters;
    this.pending = [];
    this.waiters = [];
    // recordBatch notes its failures and never rejects.
    void this.recordBatch(batch).then(() => {
      for (const resolve of waiters) resolve();
    });
  }

  private async recordBatch(batch: readonly LandedWrite[]): Promise<void> {
    const core = this.core;
    try {
      await core.index.recordWrites(
        batch.map((write) => ({ ...write.index, at: write.at })),
        batch[0].at,
        core.policy.current(),
      );
      for (const write of batch) core.liveEntries.forget(write.key);
    } catch (error) {
      // The blobs are on storage; a later lookup adopts them.
      core.noteError(error, 'index update after a block write failed');
    }
    await core.planeLink.recordWrites(batch.map((write) => ({ ...write.plane, at: write.at })));
  }
}
