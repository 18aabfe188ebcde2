import { FsBlobStore, type BlobStore } from '../../storage-adapters/index.ts';

import type { BlockIndex, IndexEntry } from './block-index.ts';
import type { Clock } from './clock.ts';
import { errorCodeOf } from './errors.ts';
import { bytesToHex } from './hex.ts';
import type { QuotaScope, RetentionPolicy } from './retention-policy.ts';

export type GcReason = 'expired' | 'evicted';

export interface GcTally {
  blocks: number;
  bytes: number;
}

export interface GcProgress {
  phase: 'rebase' | 'expire' | 'evict' | 'sweep';
  scannedBlocks: number;
  removedBlocks: number;
  removedBytes: number;
}

export interface GcOptions {
  /** Report what would be removed; change nothing. */
  dryRun?: boolean;
  /** Blocks per storage delete / index transaction. Default 256. */
  batchSize?: number;
  /** Called after every batch (long runs over millions of blocks). */
  onProgress?: (progress: GcProgress) => void;
  /** Stops between batches; the report says `aborted`. */
  signal?: AbortSignal;
  /** Age beyond which a crashed writer's temp file is swept (fs stores). Default 1 h. */
  staleTempFileMs?: number;
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
  /** Entries whose expiry was recomputed because the policy changed since the last GC. */
  rebasedEntries: number;
  tempFilesRemoved: number;
  /** Bytes and blocks the index holds after the run (before it, in a dry run, minus what would go). */
  remaining: GcTally;
  errors: { code: string; message: string }[];
}

export interface GcDeps {
  index: BlockIndex;
  store: BlobStore;
  policy: RetentionPolicy;
  clock: Clock;
  /** Told about every key removed, so caches above the index drop it. */
  onRemoved?: (keys: string[]) => void;
}

/**
 * One garbage-collection run:
 *
 * 1. If the policy version moved since the last run, recompute every
 *    entry's expiry (TTL edits apply to existing blocks).
 * 2. Expire: walk `byExpiry` up to now, delete those blocks.
 * 3. Evict: for each scope over its byte quota (tenant, class, then global),
 *    walk `byUse` oldest-first and delete until under quota.
 * 4. Sweep stale temp files of crashed writers (fs stores).
 *
 * Each batch deletes from storage first, then from the index. A crash in
 * between leaves index entries whose blob is gone: they read as misses and
 * the next run removes them. The other order could leave a blob with no
 * index entry that another node would adopt and serve after its expiry.
 * A failed storage delete keeps the batch in the index for the next run.
 */
export async function runGc(deps: GcDeps, options: GcOptions = {}): Promise<GcReport> {
  const { index, store, policy, clock } = deps;
  const dryRun = options.dryRun ?? false;
  const batchSize = options.batchSize ?? 256;
  const now = clock.now();
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
    remaining: { blocks: 0, bytes: 0 },
    errors: [],
  };
  const progress: GcProgress = { phase: 'rebase', scannedBlocks: 0, removedBlocks: 0, removedBytes: 0 };
  const aborted = () => {
    if (options.signal?.aborted) report.aborted = true;
    return report.aborted;
  };
  // Dry run: what we would have removed, so later phases do not count it twice.
  const counted = new Set<string>();
  const freedByScope = new Map<string, number>();

  const tally = (entry: IndexEntry, reason: GcReason) => {
    report.removed[reason].blocks++;
    report.removed[reason].bytes += entry.sizeBytes;
    const perClass = (report.byClass[entry.trafficClass] ??= { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } });
    perClass[reason].blocks++;
    perClass[reason].bytes += entry.sizeBytes;
    progress.removedBlocks++;
    progress.removedBytes += entry.sizeBytes;
    if (dryRun) {
      counted.add(entry.key);
      for (const tag of ['g', `c:${entry.trafficClass}`, `t:${entry.tenant}`]) freedByScope.set(tag, (freedByScope.get(tag) ?? 0) + entry.sizeBytes);
    }
  };

  /** Storage first, then index. Returns false when storage refused (batch kept for next run). */
  const removeBatch = async (victims: IndexEntry[], reason: GcReason): Promise<boolean> => {
    if (victims.length === 0) return true;
    if (dryRun) {
      for (const victim of victims) tally(victim, reason);
      return true;
    }
    try {
      await store.delete(victims.map((victim) => victim.key));
    } catch (error) {
      report.errors.push({ code: errorCodeOf(error), message: `storage delete of ${victims.length} blocks failed: ${(error as Error).message}` });
      return false;
    }
    const removed = await index.remove(victims.map((victim) => keyBytesOf(victim.key)));
    for (const entry of removed) tally(entry, reason);
    deps.onRemoved?.(removed.map((entry) => entry.key));
    return true;
  };

  // 1. Rebase expiries after a policy change.
  if (!dryRun && index.appliedPolicyVersion() !== policy.version) {
    report.rebasedEntries = await index.reapplyPolicy(policy);
    options.onProgress?.({ ...progress });
  }

  // 2. Expire.
  progress.phase = 'expire';
  let cursor: Buffer | undefined;
  while (!aborted()) {
    const batch = index.expiredBatch(now, batchSize, cursor);
    if (batch.keys.length === 0) break;
    cursor = batch.cursor;
    progress.scannedBlocks += batch.keys.length;
    const victims: IndexEntry[] = [];
    for (const keyBytes of batch.keys) {
      const entry = index.get(keyBytes);
      // Stored expiry can lag a TTL that grew in a dry run (no rebase); the current policy decides.
      if (entry !== undefined && entry.lastUseAt + policy.ttlMs(entry.trafficClass, entry.tenant) <= now) victims.push(entry);
    }
    await removeBatch(victims, 'expired');
    options.onProgress?.({ ...progress });
  }

  // 3. Evict least recently used while over quota; narrow scopes first.
  progress.phase = 'evict';
  const quotas = policy.quotas().sort((a, b) => scopeRank(b.scope) - scopeRank(a.scope));
  for (const { scope, quotaBytes } of quotas) {
    const tag = tagOf(scope);
    let scopeCursor: Buffer | undefined;
    const used = () => index.bytesIn(scope) - (freedByScope.get(tag) ?? 0);
    while (!aborted() && used() > quotaBytes) {
      const batch = index.oldestBatch(scope, batchSize, scopeCursor);
      if (batch.keys.length === 0) break;
      scopeCursor = batch.cursor;
      progress.scannedBlocks += batch.keys.length;
      const victims: IndexEntry[] = [];
      let excess = used() - quotaBytes;
      for (const keyBytes of batch.keys) {
        if (excess <= 0) break;
        const entry = index.get(keyBytes);
        if (entry === undefined || counted.has(entry.key)) continue;
        victims.push(entry);
        excess -= entry.sizeBytes;
      }
      const ok = await removeBatch(victims, 'evicted');
      options.onProgress?.({ ...progress });
      if (!ok) break;
    }
  }

  // 4. Temp files of writers that died mid-put.
  if (!dryRun && !aborted() && store instanceof FsBlobStore) {
    progress.phase = 'sweep';
    try {
      report.tempFilesRemoved = await store.removeStaleTempFiles(options.staleTempFileMs ?? 60 * 60 * 1000);
    } catch (error) {
      report.errors.push({ code: errorCodeOf(error), message: `temp file sweep failed: ${(error as Error).message}` });
    }
    options.onProgress?.({ ...progress });
  }

  report.remaining = {
    blocks: index.countIn({ kind: 'global' }) - (dryRun ? counted.size : 0),
    bytes: index.bytesIn({ kind: 'global' }) - (freedByScope.get('g') ?? 0),
  };
  report.finishedAt = clock.now();
  return report;
}

function scopeRank(scope: QuotaScope): number {
  return scope.kind === 'tenant' ? 2 : scope.kind === 'class' ? 1 : 0;
}

function tagOf(scope: QuotaScope): string {
  return scope.kind === 'global' ? 'g' : scope.kind === 'class' ? `c:${scope.name}` : `t:${scope.name}`;
}

function keyBytesOf(hex: string): Uint8Array {
  return Uint8Array.from(Buffer.from(hex, 'hex'));
}

