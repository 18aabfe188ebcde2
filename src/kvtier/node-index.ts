import type { AdoptedRecord, IndexEntry, IndexWrite } from './block-index-records.ts';
import type { QuotaScope, RetentionPolicy } from './retention-policy.ts';

/**
 * This node's index of the blocks it can serve: what lookups probe, writes
 * record, hits renew and GC prunes. Two kinds:
 *
 * - `BlockIndex` (block-index.ts): an LMDB environment of the node's own, a
 *   cache in front of the metadata plane (Redis, or the embedded LMDB plane).
 * - `PlaneIndex` (plane-index.ts): the embedded LMDB plane's records read
 *   directly, so a write and a hit cost one record where the two kinds
 *   together cost two (`KvTierOptions.nodeIndex: 'plane'`).
 *
 * Probe answers (`PROBE_ABSENT`, `PROBE_EXPIRED` or the last use) are the
 * same for both; so is what a lookup, a load or GC sees of a block.
 */
export interface NodeIndex {
  /** Where it lives (block admin opens the plane beside it). */
  readonly path: string;
  /** Lookup's hot path: PROBE_ABSENT, PROBE_EXPIRED or the last use; expiry[0] gets the expiry when given and live. `key`: keyBytes as hex when the caller has it. */
  probe(keyBytes: Uint8Array, now: number, policy: RetentionPolicy, expiry?: Float64Array, key?: string): number;
  get(key: string | Uint8Array): IndexEntry | undefined;
  /** After blocks were put on storage. */
  recordWrites(writes: readonly IndexWrite[], now: number, policy: RetentionPolicy): Promise<void>;
  /** Blocks found on storage but unknown here; returns how many were added. */
  adopt(writes: readonly Omit<IndexWrite, 'sizeBytes'>[], now: number, policy: RetentionPolicy): Promise<number>;
  /** Mirrors plane records into the index. */
  adoptRecords(records: readonly AdoptedRecord[], policy: RetentionPolicy): Promise<number>;
  /** A hit: last use = now. */
  touch(keys: readonly Uint8Array[], now: number, policy: RetentionPolicy): Promise<void>;
  /** The real size of blocks read from storage (adopted entries start at 0). */
  noteSizes(sizes: readonly { keyBytes: Uint8Array; sizeBytes: number }[]): Promise<void>;
  remove(keys: readonly Uint8Array[]): Promise<IndexEntry[]>;
  /** After a TTL change (GC, when appliedPolicyVersion moved); returns entries changed. */
  reapplyPolicy(policy: RetentionPolicy): Promise<number>;
  appliedPolicyVersion(): number | undefined;
  /** Keys expired by `now`, oldest first, after an opaque cursor (GC's local prune). */
  expiredBatch(now: number, limit: number, after?: Buffer): { keys: Buffer[]; cursor: Buffer | undefined };
  bytesIn(scope: QuotaScope): number;
  countIn(scope: QuotaScope): number;
  usage(): { bytes: Record<string, number>; blocks: Record<string, number> };
  allEntries(): Generator<IndexEntry>;
  close(): Promise<void>;
}
