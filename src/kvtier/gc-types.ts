import type { BlobStore } from '../../storage-adapters/index.ts';

import type { NodeIndex } from './node-index.ts';
import type { Clock } from './clock.ts';
import type { MetadataPlane } from './metadata/metadata-plane.ts';
import type { RetentionPolicy } from './retention-policy.ts';

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
  /** A segment store's segments whose live bytes are below this fraction of their size are compacted. Default 0.5. */
  segmentLiveFraction?: number;
  /** A blob with no record is deleted once it has been seen orphaned for this long. Default 1 h. */
  orphanGraceMs?: number;
  /**
   * List storage this run: orphans, and on an fs store stale temp files. Default true (a listing of the
   * collected shards' key ranges: on S3 one request per 1000 blobs). False = expiry and eviction only.
   */
  sweepOrphans?: boolean;
  /**
   * Plane shards to collect (a sharded plane: each under its own lease, src/cluster/sharded-gc.ts);
   * default every shard, one after the other, each on its own (an untrusted shard blocks only itself).
   */
  shards?: readonly number[];
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
  /** A segment store (storage-adapters/segment-compact.ts): segments rewritten and unlinked, and the bytes that came back. */
  segmentsCompacted: number;
  segmentBytesReclaimed: number;
  /** Records written from the storage listing because the plane had lost its data (that run deletes nothing). */
  rebuiltRecords: number;
  /** Blobs without a record deleted after the grace period. */
  orphansSwept: number;
  /** Blobs without a record seen this run and still within the grace period. */
  orphansPending: number;
  /** The collected shards: generations joined by '.', trusted when every one of them is (after this run). */
  plane: { kind: string; generation: string; trusted: boolean };
  /** Shards this run collected (judged after being trusted) and those it could not (untrusted, unreachable); [0] for an unsharded plane. */
  shards: { collected: number[]; skipped: number[] };
  /** Bytes and blocks the collected shards hold after the run (in a dry run, minus what would go). */
  remaining: GcTally;
  errors: { code: string; message: string }[];
}

export interface GcDeps {
  /** The cluster's records: GC judges by them, whatever node ran it. */
  plane: MetadataPlane;
  /** This node's index: class/tenant hints when records are rebuilt. */
  index: NodeIndex;
  store: BlobStore;
  policy: RetentionPolicy;
  clock: Clock;
  /** Told about every key removed here (removals by other nodes arrive through `plane.onRemoved`). */
  onRemoved?: (keys: string[]) => void;
}
