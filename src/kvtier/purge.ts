/**
 * Purge: remove the blocks an operator names (a tenant, a class, last used
 * before some time, or all) from storage and from a view of them — one
 * node's LMDB index (`purgeIndex`), or the cluster's metadata plane
 * (`purgePlane`, every node's truth).
 *
 * Storage first, then the view (the order GC uses): a crash in between
 * leaves entries whose blob is gone, which read as misses and are dropped by
 * the next lookup; the other order could leave a blob another node adopts.
 *
 * `at` is when the operator asked. A block created after it is not the
 * purge's (a node that applies a logged purge late must not delete blocks
 * written since), and "older than" is measured from it.
 */
import type { BlobStore } from '../../storage-adapters/index.ts';

import type { NodeIndex } from './node-index.ts';
import type { IndexEntry } from './block-index-records.ts';
import { errorCodeOf } from './errors.ts';
import type { BlockRecord, MetadataPlane } from './metadata/metadata-plane.ts';
import { hexToKeyBytes } from './prefix-hasher.ts';

export interface PurgeFilter {
  tenant?: string;
  trafficClass?: string;
  /** Last used more than this many ms before `at`. */
  olderThanMs?: number;
  /** Everything (required when no other field narrows the purge). */
  all?: boolean;
}

export interface PurgeProgress {
  phase: string;
  scannedBlocks: number;
  removedBlocks: number;
  removedBytes: number;
  /** Blocks to go through, when known up front. */
  totalBlocks?: number;
}

export interface PurgeResult {
  matched: number;
  removedBlocks: number;
  removedBytes: number;
  /** Batches whose storage delete failed: kept in the view, so a rerun retries them. */
  errors: { code: string; message: string }[];
}

const BATCH = 256;

/** Whether a purge names anything; `all` and a narrowing field do not go together. Returns a problem or undefined. */
export function purgeFilterProblem(filter: PurgeFilter): { field: string; message: string } | undefined {
  const narrowed = filter.tenant !== undefined || filter.trafficClass !== undefined || filter.olderThanMs !== undefined;
  if (!narrowed && !filter.all) return { field: 'filter', message: 'purge needs tenant, class, olderThanMs, or all: true' };
  if (narrowed && filter.all) return { field: 'all', message: 'purge takes either all or a filter, not both' };
  return undefined;
}

export function matchesPurge(block: Pick<IndexEntry, 'tenant' | 'trafficClass' | 'lastUseAt' | 'createdAt'>, filter: PurgeFilter, at: number): boolean {
  if (block.createdAt > at) return false;
  if (filter.all) return true;
  if (filter.tenant !== undefined && block.tenant !== filter.tenant) return false;
  if (filter.trafficClass !== undefined && block.trafficClass !== filter.trafficClass) return false;
  if (filter.olderThanMs !== undefined && at - block.lastUseAt <= filter.olderThanMs) return false;
  return true;
}

/**
 * Deletes `victims` from storage then from the view, batch by batch, reporting
 * after each. A key already in `counted` (removed by an earlier pass over
 * another view) is not counted again; counted keys are added to it.
 */
async function removeInBatches<T extends { key: string; sizeBytes: number }>(
  victims: readonly T[],
  store: BlobStore,
  removeFromView: (batch: readonly T[]) => Promise<readonly { key: string; sizeBytes: number }[]>,
  progress: PurgeProgress,
  onProgress: (progress: PurgeProgress) => void,
  counted: Set<string> = new Set(),
): Promise<PurgeResult> {
  const result: PurgeResult = { matched: victims.length, removedBlocks: 0, removedBytes: 0, errors: [] };
  onProgress({ ...progress });
  for (let start = 0; start < victims.length; start += BATCH) {
    const batch = victims.slice(start, start + BATCH);
    try {
      await store.delete(batch.map((v) => v.key));
    } catch (error) {
      result.errors.push({ code: errorCodeOf(error), message: `storage delete of ${batch.length} blocks failed: ${(error as Error).message}` });
      continue;
    }
    for (const removed of await removeFromView(batch)) {
      if (counted.has(removed.key)) continue;
      counted.add(removed.key);
      result.removedBlocks++;
      result.removedBytes += removed.sizeBytes;
    }
    progress.removedBlocks = result.removedBlocks;
    progress.removedBytes = result.removedBytes;
    onProgress({ ...progress });
  }
  return result;
}

/**
 * One node's index: matching entries leave storage, then the index; `forget`
 * drops them from the node's memory caches, and `forgetRecords` (after the
 * index removal) from the node's own plane, whose record would otherwise
 * still make them hits.
 */
export async function purgeIndex(
  deps: { index: NodeIndex; store: BlobStore; forget?: (keys: string[]) => void; forgetRecords?: (keys: string[]) => Promise<void> },
  filter: PurgeFilter,
  at: number,
  onProgress: (progress: PurgeProgress) => void = () => undefined,
  counted?: Set<string>,
): Promise<PurgeResult> {
  const victims: IndexEntry[] = [];
  let scanned = 0;
  for (const entry of deps.index.allEntries()) {
    scanned++;
    if (matchesPurge(entry, filter, at)) victims.push(entry);
  }
  // Entries an earlier pass already removed (and counted) still leave the index, but are not counted again.
  const fresh = counted === undefined ? victims.length : victims.filter((v) => !counted.has(v.key)).length;
  const progress: PurgeProgress = { phase: 'purge', scannedBlocks: scanned, removedBlocks: 0, removedBytes: 0, totalBlocks: fresh };
  return removeInBatches(
    victims,
    deps.store,
    async (batch) => {
      const keys = batch.map((v) => v.key);
      deps.forget?.(keys);
      const removed = await deps.index.remove(keys.map((key) => hexToKeyBytes(key)));
      await deps.forgetRecords?.(keys);
      return removed;
    },
    progress,
    onProgress,
    counted,
  );
}

/**
 * The cluster's records: every matching record leaves storage, then the
 * plane (whose removal every node hears and drops from its caches). Counts
 * each block once however many nodes had it.
 */
export async function purgePlane(
  deps: { plane: MetadataPlane; store: BlobStore },
  filter: PurgeFilter,
  at: number,
  onProgress: (progress: PurgeProgress) => void = () => undefined,
  counted?: Set<string>,
): Promise<PurgeResult> {
  const victims: BlockRecord[] = [];
  let scanned = 0;
  let cursor: string | undefined;
  do {
    const page = await deps.plane.scanByLastUse({ cursor, limit: 4096, ...(filter.olderThanMs !== undefined ? { maxLastUseAt: at - filter.olderThanMs - 1 } : {}) });
    scanned += page.records.length;
    for (const record of page.records) if (matchesPurge(record, filter, at)) victims.push(record);
    cursor = page.cursor;
  } while (cursor !== undefined);
  const progress: PurgeProgress = { phase: 'purge cluster records', scannedBlocks: scanned, removedBlocks: 0, removedBytes: 0, totalBlocks: victims.length };
  return removeInBatches(victims, deps.store, (batch) => deps.plane.remove(batch.map((v) => v.key)), progress, onProgress, counted);
}
