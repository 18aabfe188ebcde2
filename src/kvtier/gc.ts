import { FsBlobStore, type BlobStore } from '../../storage-adapters/index.ts';

import type { AdoptedRecord, BlockIndex } from './block-index.ts';
import type { Clock } from './clock.ts';
import { errorCodeOf } from './errors.ts';
import { effectiveTtlMs, scopeTagsOf, type BlockRecord, type MetadataPlane, type PlaneUsage } from './metadata/metadata-plane.ts';
import { rebuildRecords } from './plane-rebuild.ts';
import type { QuotaScope, RetentionPolicy } from './retention-policy.ts';

export type GcReason = 'expired' | 'evicted';

export interface GcTally {
  blocks: number;
  bytes: number;
}

export interface GcProgress {
  phase: 'rebuild' | 'expire' | 'evict' | 'orphans' | 'sweep';
  scannedBlocks: number;
  removedBlocks: number;
  removedBytes: number;
}

export interface GcOptions {
  /** Report what would be removed; change nothing. */
  dryRun?: boolean;
  /** Records per plane page / storage delete. Default 512. */
  batchSize?: number;
  /** Called after every batch (long runs over millions of blocks). */
  onProgress?: (progress: GcProgress) => void;
  /** Stops between batches; the report says `aborted`. A later run continues where this one stopped. */
  signal?: AbortSignal;
  /** Age beyond which a crashed writer's temp file is swept (fs stores). Default 1 h. */
  staleTempFileMs?: number;
  /** A blob with no record is deleted once it has been seen orphaned for this long. Default 1 h. */
  orphanGraceMs?: number;
  /** List storage for orphans this run. Default true (a full listing: on S3 one request per 1000 blobs). */
  sweepOrphans?: boolean;
}

export interface GcReport {
  dryRun: boolean;
  aborted: boolean;
  startedAt: number;
  finishedAt: number;
  policyVersion: number;
  /** Removed (or, in a dry run, removable) blocks by reason, and by reason then class. */
  removed: Record<GcReason, GcTally>;
  byClass: Record<string, Record<GcReason, GcTally>>;
  /** Entries of this node's index whose expiry was recomputed because the policy changed since its last GC (the plane needs none: it keeps last use and judges under the current policy). */
  rebasedEntries: number;
  tempFilesRemoved: number;
  /** Records written from the storage listing because the plane had lost its data (that run deletes nothing). */
  rebuiltRecords: number;
  /** Blobs without a record deleted after the grace period. */
  orphansSwept: number;
  /** Blobs without a record seen this run and still within the grace period. */
  orphansPending: number;
  plane: { kind: string; generation: string; trusted: boolean };
  /** Bytes and blocks the plane holds after the run (in a dry run, minus what would go). */
  remaining: GcTally;
  errors: { code: string; message: string }[];
}

export interface GcDeps {
  /** The cluster's records: GC judges by them, whatever node ran it. */
  plane: MetadataPlane;
  /** This node's index: class/tenant hints when records are rebuilt. */
  index: BlockIndex;
  store: BlobStore;
  policy: RetentionPolicy;
  clock: Clock;
  /** Told about every key removed here (removals by other nodes arrive through `plane.onRemoved`). */
  onRemoved?: (keys: string[]) => void;
}

/**
 * One cluster GC run over the metadata plane (one node at a time: the
 * cluster lease in cluster mode, a timer in embedded mode):
 *
 * 0. Rebuild: when the plane lost its data, or is new (untrusted
 *    generation), write a record for every blob on storage that has none
 *    (last use = now, so nothing live can look expired). Nothing is deleted
 *    until the listing completed and the generation is marked trusted; the
 *    run that rebuilt records then expires but does not evict (their last
 *    use, class and tenant are guesses).
 * 1. Expire: walk each class's last-use index oldest first up to now − that
 *    class's smallest TTL (its policy TTL, or a shorter tenant override), then
 *    the capped records; delete those past their TTL (class and tenant TTL
 *    under the current policy, capped by the client hint). Per class, the
 *    walk reads expired rows only (unless a tenant override is shorter).
 * 2. Evict: for each scope over its byte quota (tenant, class, then global),
 *    delete the least recently used records of that scope anywhere in the cluster.
 * 3. Orphans: list storage; a blob with no record is noted, and deleted once
 *    it has been orphaned for `orphanGraceMs` (a writer puts the blob, then
 *    the record: the grace covers that gap).
 * 4. Temp files of crashed writers (fs stores).
 *
 * Each batch is judged on the page just read, then removed from the plane on
 * condition that its last use is still the one judged (a renewal or rewrite
 * that landed since, from any node, keeps the block: record and blob), then
 * the blobs of exactly the removed records are deleted from storage. A
 * renewal still buffered on a node (≤ 1 s) when the plane removes the record
 * is lost with it. Killed, or a storage delete failing, between the two: the
 * removal noted the keys in the plane's pending-delete journal (atomically
 * with it), and the next run deletes those blobs first (unless a record was
 * written again meanwhile); a confirmed delete clears them.
 * Cursors make every phase restartable.
 */
export async function runGc(deps: GcDeps, options: GcOptions = {}): Promise<GcReport> {
  const { plane, store, policy, clock } = deps;
  const dryRun = options.dryRun ?? false;
  const batchSize = options.batchSize ?? 512;
  const now = clock.now();
  const state = await plane.state();
  const report: GcReport = {
    dryRun,
    aborted: false,
    startedAt: now,
    finishedAt: now,
    policyVersion: policy.version,
    removed: { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } },
    byClass: {},
    rebasedEntries: 0,
    tempFilesRemoved: 0,
    rebuiltRecords: 0,
    orphansSwept: 0,
    orphansPending: 0,
    plane: { kind: plane.kind, ...state },
    remaining: { blocks: 0, bytes: 0 },
    errors: [],
  };
  const progress: GcProgress = { phase: 'rebuild', scannedBlocks: 0, removedBlocks: 0, removedBytes: 0 };
  const aborted = () => {
    if (options.signal?.aborted) report.aborted = true;
    return report.aborted;
  };
  const fail = (error: unknown, what: string) => report.errors.push({ code: errorCodeOf(error), message: `${what}: ${(error as Error)?.message ?? String(error)}` });
  const counted = new Set<string>();
  const freedByScope = new Map<string, number>();
  const tally = (record: BlockRecord, reason: GcReason) => {
    report.removed[reason].blocks++;
    report.removed[reason].bytes += record.sizeBytes;
    const perClass = (report.byClass[record.trafficClass] ??= { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } });
    perClass[reason].blocks++;
    perClass[reason].bytes += record.sizeBytes;
    progress.removedBlocks++;
    progress.removedBytes += record.sizeBytes;
    counted.add(record.key);
    for (const tag of scopeTagsOf(record)) freedByScope.set(tag, (freedByScope.get(tag) ?? 0) + record.sizeBytes);
  };
  /** A batch taken by `removeByLastUse`: the plane summed it per scope tag; no record per block. */
  const tallyFreed = (freed: PlaneUsage, reason: GcReason) => {
    const blocks = freed.blocks.g ?? 0;
    const bytes = freed.bytes.g ?? 0;
    report.removed[reason].blocks += blocks;
    report.removed[reason].bytes += bytes;
    progress.removedBlocks += blocks;
    progress.removedBytes += bytes;
    for (const [tag, n] of Object.entries(freed.bytes)) freedByScope.set(tag, (freedByScope.get(tag) ?? 0) + n);
    for (const tag of new Set([...Object.keys(freed.blocks), ...Object.keys(freed.bytes)])) {
      if (!tag.startsWith('c:')) continue;
      const perClass = (report.byClass[tag.slice(2)] ??= { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } });
      perClass[reason].blocks += freed.blocks[tag] ?? 0;
      perClass[reason].bytes += freed.bytes[tag] ?? 0;
    }
  };
  const finish = async () => {
    try {
      const usage = await plane.usage();
      report.remaining = { blocks: (usage.blocks.g ?? 0) - (dryRun ? counted.size : 0), bytes: (usage.bytes.g ?? 0) - (dryRun ? (freedByScope.get('g') ?? 0) : 0) };
    } catch (error) {
      fail(error, 'reading plane usage failed');
    }
    report.finishedAt = clock.now();
    return report;
  };

  // This node's index (a cache) keeps its expiry ordering in step with the policy.
  if (!dryRun && deps.index.appliedPolicyVersion() !== policy.version) {
    try {
      report.rebasedEntries = await deps.index.reapplyPolicy(policy);
    } catch (error) {
      fail(error, 'rebasing this node index after a policy change failed');
    }
  }

  // 0. A plane that lost its data (or is new) first gets a record for every blob on storage.
  let rebuiltThisRun = false;
  // A dry run writes nothing: it judges the records there are (a blob without one is live until rebuilt).
  if (!state.trusted && !dryRun) {
    progress.phase = 'rebuild';
    try {
      const rebuilt = await rebuildRecords({ plane, store, index: deps.index, policy, now, batchSize, signal: options.signal, onBatch: (n) => {
        progress.scannedBlocks += n;
        options.onProgress?.({ ...progress });
      } });
      report.rebuiltRecords = rebuilt.written;
      rebuiltThisRun = rebuilt.written > 0;
      if (rebuilt.complete && !aborted()) report.plane.trusted = await plane.markTrusted(state.generation);
    } catch (error) {
      fail(error, 'rebuilding plane records from the storage listing failed; nothing deleted');
    }
    // Unfinished: nothing can be judged yet (a blob with no record may be a live block).
    if (!report.plane.trusted) return finish();
  }

  /**
   * Removes the plane records still at their judged last use, then deletes their blobs.
   * `inFlight` (the expire walk): that removal is left running while the next page is read
   * (pages of one walk are disjoint, so that page's judgement is unchanged); it is awaited before
   * the next removal starts and at the end of the walk. A plane failure surfaces there and stops
   * the walk; a storage failure is reported and its keys stay in the pending-delete journal.
   */
  let planeRemoval: Promise<void> | undefined;
  const settleRemoval = async () => {
    const pending = planeRemoval;
    planeRemoval = undefined;
    await pending;
  };
  const removeBatch = async (victims: BlockRecord[], reason: GcReason, inFlight = false): Promise<boolean> => {
    if (victims.length === 0) return true;
    if (dryRun) {
      for (const record of victims) tally(record, reason);
      return true;
    }
    await settleRemoval();
    const removal = (async () => {
      const removed = await plane.remove(
        victims.map((record) => record.key),
        { judgedLastUseAt: victims.map((record) => record.lastUseAt), journal: true },
      );
      await afterPlaneRemoval(removed, reason);
    })();
    if (!inFlight) {
      await removal;
      return true;
    }
    // Handled here so a rejection waiting for settleRemoval is not reported as unhandled.
    removal.catch(() => undefined);
    planeRemoval = removal;
    return true;
  };

  /** Counts what the plane removed and deletes those blobs. */
  async function afterPlaneRemoval(removed: BlockRecord[], reason: GcReason): Promise<void> {
    for (const record of removed) tally(record, reason);
    await deleteRemovedBlobs(removed.map((record) => record.key));
  }

  /** Deletes the blobs of keys the plane removed; a confirmed delete clears their journal entries (a failure keeps them for the next run). */
  async function deleteRemovedBlobs(keys: string[]): Promise<void> {
    if (keys.length === 0) return;
    deps.onRemoved?.(keys);
    try {
      await store.delete(keys);
    } catch (error) {
      fail(error, `storage delete of ${keys.length} blocks failed after their records were removed; kept in the plane's pending-delete journal for the next run`);
      return;
    }
    await plane.clearPendingDeletes(keys);
  }

  /** Blobs of records a killed (or storage-failed) run removed: deleted now, unless a record for the key was written since. */
  async function finishPendingDeletes(): Promise<void> {
    const pending = await plane.pendingDeletes();
    for (let i = 0; i < pending.length && !aborted(); i += batchSize) {
      const keys = pending.slice(i, i + batchSize);
      const records = await plane.get(keys);
      const gone = keys.filter((_, j) => records[j] === null);
      if (gone.length > 0) {
        try {
          await store.delete(gone);
        } catch (error) {
          fail(error, `storage delete of ${gone.length} blocks left by an earlier run failed; kept in the pending-delete journal`);
          return;
        }
        deps.onRemoved?.(gone);
      }
      await plane.clearPendingDeletes(keys);
    }
  }

  const ttlOf = (record: BlockRecord) => effectiveTtlMs(record, (c, t) => policy.ttlMs(c, t));
  const isExpired = (record: BlockRecord) => record.lastUseAt + ttlOf(record) <= now;

  try {
    // 1. Expire: first the blobs an earlier run removed the records of but did not delete (killed, storage failure);
    // then one walk per class present (its own last-use index), then the capped records.
    progress.phase = 'expire';
    if (!dryRun) await finishPendingDeletes();
    const classes = Object.entries((await plane.usage()).blocks)
      .filter(([tag, blocks]) => tag.startsWith('c:') && blocks > 0)
      .map(([tag]) => tag.slice(2))
      .sort();
    // Below now − the class's longest TTL every row is expired whatever its tenant or cap: removed
    // without judging, one plane call per batch (judged and removed atomically inside the plane).
    if (!dryRun) {
      for (const trafficClass of classes) {
        const maxLastUseAt = now - ttlRangeOfClass(policy, trafficClass).max;
        const take = () => {
          const taking = plane.removeByLastUse({ trafficClass, maxLastUseAt, limit: batchSize, journal: true });
          taking.catch(() => undefined); // awaited below; handled there
          return taking;
        };
        // Two batches in flight: the plane takes batch n + 1 while this process counts batch n and
        // deletes its blobs. Once asked for, a batch is always awaited and its blobs deleted, abort or not.
        let next: ReturnType<typeof take> | undefined = aborted() ? undefined : take();
        while (next !== undefined) {
          const taken = await next;
          next = taken.more && !aborted() ? take() : undefined;
          await settleRemoval();
          progress.scannedBlocks += taken.keys.length;
          tallyFreed(taken.freed, 'expired');
          const removal = deleteRemovedBlobs(taken.keys);
          removal.catch(() => undefined);
          planeRemoval = removal;
          options.onProgress?.({ ...progress });
        }
      }
    }
    // Then what needs judging: classes whose tenants' TTLs differ (up to now − the shortest), and the capped records.
    const walks: { trafficClass?: string; capped?: boolean; maxLastUseAt: number }[] = [
      ...classes
        .map((trafficClass) => ({ trafficClass, range: ttlRangeOfClass(policy, trafficClass) }))
        .filter(({ range }) => dryRun || range.min < range.max)
        .map(({ trafficClass, range }) => ({ trafficClass, maxLastUseAt: now - range.min })),
      { capped: true, maxLastUseAt: now - 1 },
    ];
    for (const walk of walks) {
      let cursor: string | undefined;
      do {
        if (aborted()) break;
        const page = await plane.scanByLastUse({ ...walk, cursor, limit: batchSize });
        cursor = page.cursor;
        progress.scannedBlocks += page.records.length;
        const candidates = page.records.filter((record) => !counted.has(record.key) && isExpired(record));
        await removeBatch(candidates, 'expired', true);
        options.onProgress?.({ ...progress });
      } while (cursor !== undefined);
      // Every removal of this walk lands (and is counted) before the next walk or phase reads.
      if (planeRemoval) {
        await settleRemoval();
        options.onProgress?.({ ...progress });
      }
    }

    // 2. Evict least recently used anywhere while a scope is over quota; narrow scopes first.
    progress.phase = 'evict';
    const quotas = policy.quotas().sort((a, b) => scopeRank(b.scope) - scopeRank(a.scope));
    // Rebuilt records carry a guessed last use, class and tenant: the run that wrote them evicts nothing.
    if (quotas.length > 0 && !aborted() && !rebuiltThisRun) {
      const usage = await plane.usage();
      // A real run's usage already lacks what expiry removed; a dry run's does not.
      const removedBefore = dryRun ? new Map<string, number>() : new Map(freedByScope);
      for (const { scope, quotaBytes } of quotas) {
        const tag = tagOf(scope);
        const used = () => (usage.bytes[tag] ?? 0) - (freedByScope.get(tag) ?? 0) + (removedBefore.get(tag) ?? 0);
        let cursor: string | undefined;
        while (!aborted() && used() > quotaBytes) {
          const page = await plane.scanByLastUse({ cursor, limit: batchSize });
          progress.scannedBlocks += page.records.length;
          const victims: BlockRecord[] = [];
          let excess = used() - quotaBytes;
          for (const record of page.records) {
            if (excess <= 0) break;
            if (counted.has(record.key) || !scopeTagsOf(record).includes(tag)) continue;
            victims.push(record);
            excess -= record.sizeBytes;
          }
          const ok = await removeBatch(victims, 'evicted');
          options.onProgress?.({ ...progress });
          if (!ok || page.cursor === undefined) break;
          cursor = page.cursor;
        }
      }
    }

    // This node's index is a cache: entries it holds as expired whose record is gone (another
    // node's GC, or a run of ours killed before it dropped them) or expired go; live ones are refreshed.
    if (!dryRun && !aborted()) await pruneLocalIndex(deps, now, batchSize, aborted, ttlOf);

    // 3. Orphans: blobs no record knows.
    if (!dryRun && !aborted() && (options.sweepOrphans ?? true)) {
      progress.phase = 'orphans';
      await sweepOrphans(deps, options, now, batchSize, report, progress, aborted);
    }
  } catch (error) {
    fail(error, 'metadata plane failed mid-run; the next run continues');
    // A removal still running when a read failed: it lands (or fails) before the report is made.
    await settleRemoval().catch((late: unknown) => fail(late, 'metadata plane failed mid-run; the next run continues'));
  }

  // 4. Temp files of writers that died mid-put.
  if (!dryRun && !aborted() && store instanceof FsBlobStore) {
    progress.phase = 'sweep';
    try {
      report.tempFilesRemoved = await store.removeStaleTempFiles(options.staleTempFileMs ?? 60 * 60 * 1000);
    } catch (error) {
      fail(error, 'temp file sweep failed');
    }
    options.onProgress?.({ ...progress });
  }
  return finish();
}

async function pruneLocalIndex(
  deps: GcDeps,
  now: number,
  batchSize: number,
  aborted: () => boolean,
  ttlOf: (record: BlockRecord) => number,
): Promise<void> {
  const { index, plane, policy } = deps;
  let cursor: Buffer | undefined;
  while (!aborted()) {
    const batch = index.expiredBatch(now, batchSize, cursor);
    if (batch.keys.length === 0) return;
    cursor = batch.cursor;
    const keys = batch.keys.map((keyBytes) => keyBytes.toString('hex'));
    const records = await plane.get(keys);
    const gone: Uint8Array[] = [];
    const live: AdoptedRecord[] = [];
    records.forEach((record, i) => {
      if (record === null || record.lastUseAt + ttlOf(record) <= now) gone.push(Uint8Array.from(batch.keys[i]));
      else {
        const entry = index.get(Uint8Array.from(batch.keys[i]));
        live.push({ keyBytes: Uint8Array.from(batch.keys[i]), sizeBytes: record.sizeBytes, trafficClass: record.trafficClass, tenant: record.tenant, depth: entry?.depth ?? record.depth, createdAt: record.createdAt, lastUseAt: record.lastUseAt, ttlCapMs: record.ttlMs });
      }
    });
    if (gone.length > 0) {
      const removed = await index.remove(gone);
      deps.onRemoved?.(removed.map((entry) => entry.key));
    }
    if (live.length > 0) await index.adoptRecords(live, policy);
  }
}

async function sweepOrphans(
  deps: GcDeps,
  options: GcOptions,
  now: number,
  batchSize: number,
  report: GcReport,
  progress: GcProgress,
  aborted: () => boolean,
): Promise<void> {
  const { plane, store } = deps;
  const grace = options.orphanGraceMs ?? 60 * 60 * 1000;
  const sightings = await plane.orphanSightings();
  const listed = new Set<string>();
  let complete = true;
  const judge = async (keys: string[]) => {
    const records = await plane.get(keys);
    const orphans = keys.filter((_, i) => records[i] === null);
    const known = keys.filter((key, i) => records[i] !== null && sightings.has(key));
    if (known.length > 0) await plane.clearOrphans(known);
    if (orphans.length === 0) return;
    const firstSeen = await plane.noteOrphans(orphans, now);
    const due = orphans.filter((_, i) => now - firstSeen[i] >= grace);
    report.orphansPending += orphans.length - due.length;
    if (due.length === 0) return;
    // A record may have appeared since (a slow writer): judge again right before deleting.
    const again = await plane.get(due);
    const victims = due.filter((_, i) => again[i] === null);
    try {
      await store.delete(victims);
    } catch (error) {
      report.errors.push({ code: errorCodeOf(error), message: `deleting ${victims.length} orphan blobs failed: ${(error as Error).message}` });
      return;
    }
    await plane.clearOrphans(victims);
    report.orphansSwept += victims.length;
    deps.onRemoved?.(victims);
  };
  let batch: string[] = [];
  for await (const key of store.list()) {
    if (!isBlockKey(key)) continue;
    listed.add(key);
    batch.push(key);
    if (batch.length >= batchSize) {
      progress.scannedBlocks += batch.length;
      await judge(batch);
      batch = [];
      options.onProgress?.({ ...progress });
      if (aborted()) {
        complete = false;
        break;
      }
    }
  }
  if (complete && batch.length > 0) {
    progress.scannedBlocks += batch.length;
    await judge(batch);
    options.onProgress?.({ ...progress });
  }
  // Sightings of blobs that are gone (deleted by hand, swept by an earlier run killed before clearing).
  if (complete) {
    const gone = [...sightings.keys()].filter((key) => !listed.has(key));
    if (gone.length > 0) await plane.clearOrphans(gone);
  }
}

const BLOCK_KEY = /^[0-9a-f]{32}$/;

function isBlockKey(key: string): boolean {
  return BLOCK_KEY.test(key);
}

/**
 * The shortest and longest policy TTL a record of `trafficClass` can have: the class's own
 * (a class the policy no longer has falls back to the default class) and tenant overrides.
 * Client hints only shorten a TTL; those records are walked separately (capped).
 */
function ttlRangeOfClass(policy: RetentionPolicy, trafficClass: string): { min: number; max: number } {
  const doc = policy.toJSON();
  const own = (Object.hasOwn(doc.classes, trafficClass) ? doc.classes[trafficClass] : doc.classes[doc.defaultClass]).ttlMs;
  let min = own;
  let max = own;
  for (const override of Object.values(doc.tenants)) {
    const ttl = override.ttlMs?.[trafficClass];
    if (ttl === undefined) continue;
    min = Math.min(min, ttl);
    max = Math.max(max, ttl);
  }
  return { min, max };
}

function scopeRank(scope: QuotaScope): number {
  return scope.kind === 'tenant' ? 2 : scope.kind === 'class' ? 1 : 0;
}

function tagOf(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}
