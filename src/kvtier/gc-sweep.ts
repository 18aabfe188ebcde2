/**
 * GC's housekeeping steps: this node's index brought in line with the plane (`pruneLocalIndex`), and
 * one shard's orphan sweep (`sweepOrphans`, step 3: blobs on storage no record knows, deleted once
 * seen orphaned for `orphanGraceMs` — a writer puts the blob, then the record: the grace covers that gap).
 */
import type { AdoptedRecord } from './block-index-records.ts';
import { errorCodeOf } from './errors.ts';
import type { GcRun, ShardPass } from './gc-run.ts';

/**
 * This node's index is a cache: entries it holds as expired whose record is gone (another node's GC,
 * or a run of ours killed before it dropped them) or expired go; live ones are refreshed. Only keys
 * `covers` accepts (the shards this run judged, trusted) are touched: a key of an untrusted shard has
 * no record until its rebuild, and its entry is the rebuild's class/tenant hint.
 */
export async function pruneLocalIndex(run: GcRun, covers: (key: string) => boolean): Promise<void> {
  const { index, plane, policy } = run.deps;
  let cursor: Buffer | undefined;
  while (!run.aborted()) {
    const batch = index.expiredBatch(run.now, run.batchSize, cursor);
    if (batch.keys.length === 0) return;
    cursor = batch.cursor;
    const mine = batch.keys.filter((keyBytes) => covers(keyBytes.toString('hex')));
    if (mine.length === 0) continue;
    const records = await plane.get(mine.map((keyBytes) => keyBytes.toString('hex')));
    const gone: Uint8Array[] = [];
    const live: AdoptedRecord[] = [];
    records.forEach((record, i) => {
      const keyBytes = Uint8Array.from(mine[i]);
      if (record === null || run.isExpired(record)) gone.push(keyBytes);
      else {
        const entry = index.get(keyBytes);
        live.push({ keyBytes, sizeBytes: record.sizeBytes, trafficClass: record.trafficClass, tenant: record.tenant, depth: entry?.depth ?? record.depth, createdAt: record.createdAt, lastUseAt: record.lastUseAt, ttlCapMs: record.ttlMs, kind: record.kind });
      }
    });
    if (gone.length > 0) {
      const removed = await index.remove(gone);
      run.deps.onRemoved?.(removed.map((entry) => entry.key));
    }
    if (live.length > 0) await index.adoptRecords(live, policy);
  }
}

/** Lists the shard's key range (its storage prefixes) and judges each listed blob against the plane. */
export async function sweepOrphans(pass: ShardPass): Promise<void> {
  const { run, plane } = pass;
  const { store } = run.deps;
  const { report, progress } = run;
  run.progress.phase = 'orphans';
  const grace = run.options.orphanGraceMs ?? 60 * 60 * 1000;
  const sightings = await plane.orphanSightings();
  const listed = new Set<string>();
  let complete = true;
  const judge = async (keys: string[]) => {
    const records = await plane.get(keys);
    const orphans = keys.filter((_, i) => records[i] === null);
    const known = keys.filter((key, i) => records[i] !== null && sightings.has(key));
    if (known.length > 0) await plane.clearOrphans(known);
    if (orphans.length === 0) return;
    const firstSeen = await plane.noteOrphans(orphans, run.now);
    const due = orphans.filter((_, i) => run.now - firstSeen[i] >= grace);
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
    run.deps.onRemoved?.(victims);
  };
  let batch: string[] = [];
  listing: for (const prefix of plane.keyPrefixes?.() ?? ['']) {
    for await (const key of store.list(prefix)) {
      if (!isBlockKey(key)) continue;
      listed.add(key);
      batch.push(key);
      if (batch.length >= run.batchSize) {
        progress.scannedBlocks += batch.length;
        await judge(batch);
        batch = [];
        run.emit();
        if (run.aborted()) {
          complete = false;
          break listing;
        }
      }
    }
  }
  if (complete && batch.length > 0) {
    progress.scannedBlocks += batch.length;
    await judge(batch);
    run.emit();
  }
  // Sightings of blobs that are gone (deleted by hand, swept by an earlier run killed before clearing).
  if (complete) {
    const gone = [...sightings.keys()].filter((key) => !listed.has(key));
    if (gone.length > 0) await plane.clearOrphans(gone);
  }
}

const BLOCK_KEY = /^[0-9a-f]{32}$/;

export function isBlockKey(key: string): boolean {
  return BLOCK_KEY.test(key);
}
