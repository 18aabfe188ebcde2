/**
 * The state of one GC run (`GcRun`: options, report, progress, shared by every shard it collects) and
 * of one shard's pass in it (`ShardPass`: that shard's plane, what it removed, its removal pipeline).
 */
import { errorCodeOf } from './errors.ts';
import type { GcDeps, GcOptions, GcProgress, GcReason, GcReport } from './gc-types.ts';
import { effectiveTtlMs, scopeTagsOf, type BlockRecord, type MetadataPlane, type PlaneUsage } from './metadata/metadata-plane.ts';

export class GcRun {
  readonly dryRun: boolean;
  readonly batchSize: number;
  readonly now: number;
  readonly report: GcReport;
  readonly progress: GcProgress = { phase: 'rebuild', scannedBlocks: 0, removedBlocks: 0, removedBytes: 0 };

  constructor(
    readonly deps: GcDeps,
    readonly options: GcOptions,
  ) {
    this.dryRun = options.dryRun ?? false;
    this.batchSize = options.batchSize ?? 512;
    this.now = deps.clock.now();
    this.report = {
      dryRun: this.dryRun,
      aborted: false,
      startedAt: this.now,
      finishedAt: this.now,
      policyVersion: deps.policy.version,
      removed: { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } },
      byClass: {},
      rebasedEntries: 0,
      tempFilesRemoved: 0,
      segmentsCompacted: 0,
      segmentBytesReclaimed: 0,
      rebuiltRecords: 0,
      orphansSwept: 0,
      orphansPending: 0,
      plane: { kind: deps.plane.kind, generation: '', trusted: true },
      shards: { collected: [], skipped: [] },
      remaining: { blocks: 0, bytes: 0 },
      errors: [],
    };
  }

  aborted(): boolean {
    if (this.options.signal?.aborted) this.report.aborted = true;
    return this.report.aborted;
  }

  fail(error: unknown, what: string): void {
    this.report.errors.push({ code: errorCodeOf(error), message: `${what}: ${(error as Error)?.message ?? String(error)}` });
  }

  emit(): void {
    this.options.onProgress?.({ ...this.progress });
  }

  /** Counts `blocks`/`bytes` removed for `reason` (per class when `trafficClass` is given). */
  count(reason: GcReason, blocks: number, bytes: number, trafficClass?: string): void {
    if (trafficClass !== undefined) {
      const perClass = (this.report.byClass[trafficClass] ??= { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } });
      perClass[reason].blocks += blocks;
      perClass[reason].bytes += bytes;
      return;
    }
    this.report.removed[reason].blocks += blocks;
    this.report.removed[reason].bytes += bytes;
    this.progress.removedBlocks += blocks;
    this.progress.removedBytes += bytes;
  }

  ttlOf(record: BlockRecord): number {
    return effectiveTtlMs(record, (trafficClass, tenant) => this.deps.policy.ttlMs(trafficClass, tenant));
  }

  isExpired(record: BlockRecord): boolean {
    return record.lastUseAt + this.ttlOf(record) <= this.now;
  }
}

/**
 * One shard's pass. Removal order (why: a killed run or a failed storage delete loses nothing): the
 * plane removes records still at their judged last use and notes them in its pending-delete journal
 * atomically, then their blobs are deleted, then the journal entries cleared.
 */
export class ShardPass {
  /** Keys removed (or, dry run, removable) in this pass. */
  readonly counted = new Set<string>();
  /** Bytes removed per scope tag in this pass (eviction's running usage). */
  readonly freedByScope = new Map<string, number>();
  /** Records were rebuilt from the listing in this pass: their last use, class and tenant are guesses, so nothing is evicted. */
  rebuiltThisRun = false;
  /** A removal left running while the walk reads its next page (awaited before the next one starts). */
  private planeRemoval: Promise<void> | undefined;

  constructor(
    readonly run: GcRun,
    readonly plane: MetadataPlane,
    /** This shard's number (0 for an unsharded plane). */
    readonly shard: number,
  ) {}

  tally(record: BlockRecord, reason: GcReason): void {
    this.run.count(reason, 1, record.sizeBytes);
    this.run.count(reason, 1, record.sizeBytes, record.trafficClass);
    this.counted.add(record.key);
    for (const tag of scopeTagsOf(record)) this.freedByScope.set(tag, (this.freedByScope.get(tag) ?? 0) + record.sizeBytes);
  }

  /** A batch taken by `removeByLastUse`: the plane summed it per scope tag; no record per block. */
  tallyFreed(freed: PlaneUsage, reason: GcReason): void {
    this.run.count(reason, freed.blocks.g ?? 0, freed.bytes.g ?? 0);
    for (const [tag, n] of Object.entries(freed.bytes)) this.freedByScope.set(tag, (this.freedByScope.get(tag) ?? 0) + n);
    for (const tag of new Set([...Object.keys(freed.blocks), ...Object.keys(freed.bytes)])) {
      if (tag.startsWith('c:')) this.run.count(reason, freed.blocks[tag] ?? 0, freed.bytes[tag] ?? 0, tag.slice(2));
    }
  }

  /** Awaits the removal left running, if any; true when there was one. */
  async settleRemoval(): Promise<boolean> {
    const pending = this.planeRemoval;
    this.planeRemoval = undefined;
    await pending;
    return pending !== undefined;
  }

  /** Leaves `removal` running until the next `settleRemoval` (its rejection surfaces there). */
  private leave(removal: Promise<void>): void {
    removal.catch(() => undefined);
    this.planeRemoval = removal;
  }

  /**
   * Removes the plane records still at their judged last use, then deletes their blobs. `inFlight`
   * (the expire walk): left running while the next page is read (pages of one walk are disjoint, so
   * that page's judgement is unchanged); awaited before the next removal starts and at the end of the walk.
   */
  async removeBatch(victims: BlockRecord[], reason: GcReason, inFlight = false): Promise<void> {
    if (victims.length === 0) return;
    if (this.run.dryRun) {
      for (const record of victims) this.tally(record, reason);
      return;
    }
    await this.settleRemoval();
    const removal = (async () => {
      const removed = await this.plane.remove(
        victims.map((record) => record.key),
        { judgedLastUseAt: victims.map((record) => record.lastUseAt), journal: true },
      );
      for (const record of removed) this.tally(record, reason);
      await this.deleteRemovedBlobs(removed.map((record) => record.key));
    })();
    if (inFlight) this.leave(removal);
    else await removal;
  }

  /** After a batch take: its blobs are deleted while the plane takes the next batch. */
  deleteInFlight(keys: string[]): void {
    this.leave(this.deleteRemovedBlobs(keys));
  }

  /** Deletes the blobs of keys the plane removed; a confirmed delete clears their journal entries (a failure keeps them for the next run). */
  async deleteRemovedBlobs(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    this.run.deps.onRemoved?.(keys);
    try {
      await this.run.deps.store.delete(keys);
    } catch (error) {
      this.run.fail(error, `storage delete of ${keys.length} blocks failed after their records were removed; kept in the plane's pending-delete journal for the next run`);
      return;
    }
    await this.plane.clearPendingDeletes(keys);
  }

  /** Blobs of records a killed (or storage-failed) run removed: deleted now, unless a record for the key was written since. */
  async finishPendingDeletes(): Promise<void> {
    const { run, plane } = this;
    const pending = await plane.pendingDeletes();
    for (let i = 0; i < pending.length && !run.aborted(); i += run.batchSize) {
      const keys = pending.slice(i, i + run.batchSize);
      const records = await plane.get(keys);
      const gone = keys.filter((_, j) => records[j] === null);
      if (gone.length > 0) {
        try {
          await run.deps.store.delete(gone);
        } catch (error) {
          run.fail(error, `storage delete of ${gone.length} blocks left by an earlier run failed; kept in the pending-delete journal`);
          return;
        }
        run.deps.onRemoved?.(gone);
      }
      await plane.clearPendingDeletes(keys);
    }
  }
}
