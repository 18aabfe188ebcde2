import { FsBlobStore, SegmentBlobStore } from '../../storage-adapters/index.ts';

import { PlaneError } from './errors.ts';
import { evictShard } from './gc-evict.ts';
import { expireShard } from './gc-expire.ts';
import { GcRun, ShardPass } from './gc-run.ts';
import { pruneLocalIndex, sweepOrphans } from './gc-sweep.ts';
import type { GcDeps, GcOptions, GcReport } from './gc-types.ts';
import type { MetadataPlane } from './metadata/metadata-plane.ts';
import { rebuildRecords } from './plane-rebuild.ts';

export type { GcDeps, GcOptions, GcProgress, GcReason, GcReport, GcTally } from './gc-types.ts';

/**
 * One GC run over the metadata plane (in cluster mode under a lease: one per plane shard,
 * src/cluster/sharded-gc.ts; in embedded mode on a timer). Each shard (a sharded Redis plane's shard
 * alone, `MetadataPlane.shard`; an unsharded plane is one) is collected on its own, in steps:
 *
 * 0. Rebuild: when the shard lost its data, or is new (untrusted generation), write a record for
 *    every blob of its key range on storage that has none (last use = now, so nothing live can look
 *    expired). Nothing of that shard is deleted until its listing completed and its generation is
 *    marked trusted; the run that rebuilt records then expires but does not evict (their last use,
 *    class and tenant are guesses). Other shards are collected meanwhile: an untrusted shard blocks
 *    only its own GC.
 * 1. Expire (gc-expire.ts): the blobs an earlier run removed the records of; then each class's
 *    last-use index up to now − its TTL, then the capped records.
 * 2. Evict (gc-evict.ts): least recently used of each scope over its quota (the shard's share).
 * 3. Orphans (gc-sweep.ts): list the shard's key range; a blob with no record is noted, and deleted
 *    once it has been orphaned for `orphanGraceMs`.
 * Then, once per run: this node's index brought in line with the judged shards (gc-sweep.ts), and
 * 4. temp files of crashed writers (fs stores).
 *
 * Each batch is judged on the page just read, then removed from the plane on condition that its last
 * use is still the one judged (a renewal or rewrite that landed since, from any node, keeps the block:
 * record and blob), then the blobs of exactly the removed records are deleted from storage. A renewal
 * still buffered on a node (≤ 1 s) when the plane removes the record is lost with it. Killed, or a
 * storage delete failing, between the two: the removal noted the keys in the plane's pending-delete
 * journal (atomically with it), and the next run deletes those blobs first (unless a record was
 * written again meanwhile); a confirmed delete clears them. Cursors make every step restartable.
 */
export async function runGc(deps: GcDeps, options: GcOptions = {}): Promise<GcReport> {
  const run = new GcRun(deps, options);
  await rebaseLocalIndex(run);
  const judged: ShardPass[] = [];
  const generations: string[] = [];
  for (const [shard, plane] of shardsOf(deps.plane, options.shards)) {
    if (run.aborted()) break;
    const pass = new ShardPass(run, plane, shard);
    const generation = await collectShard(pass);
    generations.push(generation ?? '?');
    if (generation !== undefined) judged.push(pass);
  }
  run.report.plane.generation = generations.join('.');
  run.report.shards.collected = judged.map((pass) => pass.shard);
  if (!run.dryRun && !run.aborted() && judged.length > 0) {
    try {
      await pruneLocalIndex(run, coveredBy(judged));
    } catch (error) {
      run.fail(error, 'pruning this node index against the plane failed; the next run continues');
    }
  }
  await sweepTempFiles(run);
  run.report.finishedAt = deps.clock.now();
  return run.report;
}

/** The plane's shards to collect: each sharded shard alone, or the unsharded plane as shard 0. */
function shardsOf(plane: MetadataPlane, wanted: readonly number[] | undefined): [number, MetadataPlane][] {
  const count = plane.shard ? (plane.shardCount ?? 1) : 1;
  const shards = wanted ?? Array.from({ length: count }, (_, s) => s);
  for (const s of shards) {
    if (!Number.isInteger(s) || s < 0 || s >= count) throw new PlaneError('KVT_ERR_PLANE_SHARDS', `GC of shard ${s}: this plane has ${count} shard${count === 1 ? '' : 's'} (0..${count - 1})`);
  }
  return [...new Set(shards)].map((s) => [s, count > 1 && plane.shard ? plane.shard(s) : plane]);
}

/** This node's index (a cache) keeps its expiry ordering in step with the policy. */
async function rebaseLocalIndex(run: GcRun): Promise<void> {
  const { index, policy } = run.deps;
  if (run.dryRun || index.appliedPolicyVersion() === policy.version) return;
  try {
    run.report.rebasedEntries = await index.reapplyPolicy(policy);
  } catch (error) {
    run.fail(error, 'rebasing this node index after a policy change failed');
  }
}

/** Steps 0–3 on one shard; its generation when it was (or became) trusted and was judged, undefined when it could not be. */
async function collectShard(pass: ShardPass): Promise<string | undefined> {
  const { run, plane } = pass;
  let generation: string;
  try {
    const state = await plane.state();
    generation = state.generation;
    if (!state.trusted && run.dryRun) run.report.plane.trusted = false;
    // A dry run writes nothing: it judges the records there are (a blob without one is live until rebuilt).
    if (!state.trusted && !run.dryRun && !(await rebuildShard(pass, generation))) return skipShard(pass);
  } catch (error) {
    run.fail(error, `reading the trust of plane shard ${pass.shard} failed; that shard waits for the next run`);
    return skipShard(pass);
  }
  try {
    await expireShard(pass);
    await evictShard(pass);
    if (!run.dryRun && !run.aborted() && (run.options.sweepOrphans ?? true)) await sweepOrphans(pass);
  } catch (error) {
    run.fail(error, 'metadata plane failed mid-run; the next run continues');
    // A removal still running when a read failed: it lands (or fails) before the report is made.
    await pass.settleRemoval().catch((late: unknown) => run.fail(late, 'metadata plane failed mid-run; the next run continues'));
  }
  try {
    const usage = await plane.usage();
    run.report.remaining.blocks += (usage.blocks.g ?? 0) - (run.dryRun ? pass.counted.size : 0);
    run.report.remaining.bytes += (usage.bytes.g ?? 0) - (run.dryRun ? (pass.freedByScope.get('g') ?? 0) : 0);
  } catch (error) {
    run.fail(error, 'reading plane usage failed');
  }
  return generation;
}

/** Step 0: records for the shard's blobs from the storage listing of its key range; true once it is trusted. */
async function rebuildShard(pass: ShardPass, generation: string): Promise<boolean> {
  const { run, plane } = pass;
  const { store, index, policy } = run.deps;
  run.progress.phase = 'rebuild';
  try {
    const rebuilt = await rebuildRecords({ plane, store, index, policy, now: run.now, batchSize: run.batchSize, signal: run.options.signal, onBatch: (n) => {
      run.progress.scannedBlocks += n;
      run.emit();
    } });
    run.report.rebuiltRecords += rebuilt.written;
    pass.rebuiltThisRun = rebuilt.written > 0;
    // Unfinished: nothing can be judged yet (a blob with no record may be a live block).
    return rebuilt.complete && !run.aborted() && (await plane.markTrusted(generation));
  } catch (error) {
    run.fail(error, `rebuilding plane shard ${pass.shard} records from the storage listing failed; nothing of it deleted`);
    return false;
  }
}

function skipShard(pass: ShardPass): undefined {
  pass.run.report.plane.trusted = false;
  pass.run.report.shards.skipped.push(pass.shard);
  return undefined;
}

/** Keys of the judged shards (by their storage prefixes; an unsharded plane covers every key). */
function coveredBy(passes: ShardPass[]): (key: string) => boolean {
  const prefixes = passes.flatMap((pass) => pass.plane.keyPrefixes?.() ?? ['']);
  if (prefixes.includes('')) return () => true;
  return (key) => prefixes.some((prefix) => key.startsWith(prefix));
}

/** Step 4: temp files of writers that died mid-put (fs); the space of deleted blocks (segment store: compaction, after this run's deletes). */
async function sweepTempFiles(run: GcRun): Promise<void> {
  const { store } = run.deps;
  if (store instanceof SegmentBlobStore && !run.dryRun && !run.aborted()) {
    run.progress.phase = 'sweep';
    try {
      const compacted = await store.compact({ maxLiveFraction: run.options.segmentLiveFraction, signal: run.options.signal });
      run.report.segmentsCompacted = compacted.segmentsRemoved;
      run.report.segmentBytesReclaimed = compacted.bytesReclaimed;
    } catch (error) {
      run.fail(error, 'segment compaction failed');
    }
    run.emit();
    return;
  }
  if (run.dryRun || run.aborted() || !(store instanceof FsBlobStore) || !(run.options.sweepOrphans ?? true)) return;
  run.progress.phase = 'sweep';
  try {
    run.report.tempFilesRemoved = await store.removeStaleTempFiles(run.options.staleTempFileMs ?? 60 * 60 * 1000);
  } catch (error) {
    run.fail(error, 'temp file sweep failed');
  }
  run.emit();
}

/** One report of several runs over different shards (a runner's shards, each under its own lease). */
export function mergeGcReports(reports: readonly GcReport[]): GcReport {
  const [first, ...rest] = reports;
  const merged: GcReport = structuredClone(first);
  for (const report of rest) {
    merged.aborted ||= report.aborted;
    merged.startedAt = Math.min(merged.startedAt, report.startedAt);
    merged.finishedAt = Math.max(merged.finishedAt, report.finishedAt);
    for (const reason of ['expired', 'evicted'] as const) {
      merged.removed[reason].blocks += report.removed[reason].blocks;
      merged.removed[reason].bytes += report.removed[reason].bytes;
      for (const [trafficClass, tally] of Object.entries(report.byClass)) {
        const into = (merged.byClass[trafficClass] ??= { expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } });
        into[reason].blocks += tally[reason].blocks;
        into[reason].bytes += tally[reason].bytes;
      }
    }
    for (const field of ['rebasedEntries', 'tempFilesRemoved', 'segmentsCompacted', 'segmentBytesReclaimed', 'rebuiltRecords', 'orphansSwept', 'orphansPending'] as const) merged[field] += report[field];
    merged.plane.generation += `.${report.plane.generation}`;
    merged.plane.trusted &&= report.plane.trusted;
    merged.shards.collected.push(...report.shards.collected);
    merged.shards.skipped.push(...report.shards.skipped);
    merged.remaining.blocks += report.remaining.blocks;
    merged.remaining.bytes += report.remaining.bytes;
    merged.errors.push(...report.errors);
  }
  return merged;
}
