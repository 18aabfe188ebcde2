import type { BlobStore } from '../../storage-adapters/index.ts';

import { BLOCK_MAGIC, FIXED_HEADER_BYTES } from './block-codec.ts';
import { TAIL_FIXED_HEADER_BYTES, TAIL_MAGIC } from './tail-codec.ts';
import { errorCodeOf } from './errors.ts';
import { looksSealed, sealedContent } from './seal/index.ts';
import { MAX_BLOCK_READ_BYTES } from './read-buffer-pool.ts';
import type { NodeIndex } from './node-index.ts';
import type { BlockRecord, MetadataPlane } from './metadata/metadata-plane.ts';
import type { RetentionPolicy } from './retention-policy.ts';

/** Tenant of a record rebuilt from a blob no local index knew (the block header does not carry it). */
export const REBUILT_TENANT = '(rebuilt)';

export interface RebuildOptions {
  plane: MetadataPlane;
  store: BlobStore;
  /** This node's index: class, tenant, size and depth of the blocks it knows. */
  index: NodeIndex;
  policy: RetentionPolicy;
  now: number;
  batchSize: number;
  signal?: AbortSignal;
  onBatch?: (keys: number) => void;
  /** Blob reads in flight for blocks the index does not know. Default 16. */
  readConcurrency?: number;
}

/**
 * Writes a record for every block on storage that has none, after the plane
 * lost its data. Judged conservatively, so that no live block can look
 * expired: last use = now, and a block this node's index does not know gets
 * the class with the longest TTL and its size from the blob (a plain block
 * header naming another key, or a blob past the read bound MAX_BLOCK_READ_BYTES
 * that no load could ever use, gets no record: it stays an orphan, swept after
 * the grace period). A unit tail's record says so (kind 'tail'): from the
 * index entry, else from the blob (a tail file's magic, or a sealed blob's
 * envelope content byte). Blobs are read bounded like a load: a blob claiming
 * terabytes is refused from its size, never read into memory. Only missing records are written (`ifAbsent`): a record
 * a node wrote meanwhile is kept. Restartable: a killed rebuild leaves the
 * plane untrusted and the next run lists again.
 */
export async function rebuildRecords(options: RebuildOptions): Promise<{ written: number; complete: boolean }> {
  const { plane, store, index, policy, now } = options;
  const longestClass = Object.entries(policy.doc.classes).sort((a, b) => b[1].ttlMs - a[1].ttlMs)[0][0];
  const concurrency = options.readConcurrency ?? 16;
  let written = 0;
  const rebuildBatch = async (keys: string[]) => {
    const existing = await plane.get(keys);
    const missing = keys.filter((_, i) => existing[i] === null);
    const records: BlockRecord[] = [];
    const unknown: string[] = [];
    for (const key of missing) {
      const entry = index.get(key);
      if (entry !== undefined && entry.sizeBytes > 0) {
        records.push({ key, trafficClass: entry.trafficClass, tenant: entry.tenant, sizeBytes: entry.sizeBytes, writer: '', createdAt: entry.createdAt, lastUseAt: now, ttlMs: entry.ttlCapMs ?? 0, depth: entry.depth, ...(entry.kind === 'tail' ? { kind: 'tail' as const } : {}) });
      } else unknown.push(key);
    }
    for (let i = 0; i < unknown.length; i += concurrency) {
      const read = await Promise.all(unknown.slice(i, i + concurrency).map(async (key) => ({ key, bytes: await readBounded(store, key) })));
      for (const { key, bytes } of read) {
        // A plain block naming another key is misplaced: no record (an orphan, swept after the grace period).
        // Anything else under a block key (a sealed or newer-format block) is kept: GC deletes nothing it cannot judge.
        if (bytes === null || bytes === 'too-large' || namesOtherKey(key, bytes)) continue;
        const entry = index.get(key);
        records.push({
          key,
          trafficClass: entry?.trafficClass ?? longestClass,
          tenant: entry?.tenant ?? REBUILT_TENANT,
          sizeBytes: bytes.byteLength,
          writer: '',
          createdAt: entry?.createdAt ?? now,
          lastUseAt: now,
          ttlMs: entry?.ttlCapMs ?? 0,
          depth: entry?.depth ?? 0,
          ...(entry?.kind === 'tail' || isTailBlob(bytes) ? { kind: 'tail' as const } : {}),
        });
      }
    }
    if (records.length > 0) await plane.upsert(records, { ifAbsent: true });
    written += records.length;
    options.onBatch?.(keys.length);
  };
  // A sharded plane that lost some shards lists only their keys (a prefix listing per shard key
  // range); the others' records stay as they are.
  const prefixes = (await plane.rebuildScope?.()) ?? [''];
  let batch: string[] = [];
  for (const prefix of prefixes) {
    for await (const key of store.list(prefix)) {
      if (!/^[0-9a-f]{32}$/.test(key)) continue;
      batch.push(key);
      if (batch.length >= options.batchSize) {
        await rebuildBatch(batch);
        batch = [];
        if (options.signal?.aborted) return { written, complete: false };
      }
    }
  }
  if (batch.length > 0) await rebuildBatch(batch);
  return { written, complete: !options.signal?.aborted };
}

/** The blob under `key`, null when gone, 'too-large' past the bound a load reads (an orphan: no load can use it). */
async function readBounded(store: BlobStore, key: string): Promise<Uint8Array | null | 'too-large'> {
  try {
    return await store.get(key, { maxBytes: MAX_BLOCK_READ_BYTES });
  } catch (error) {
    if (errorCodeOf(error) === 'KVT_ERR_STORAGE_TOO_LARGE') return 'too-large';
    throw error;
  }
}

/** A unit tail file, plain (its magic) or sealed (the envelope's content byte, readable without the key). */
function isTailBlob(bytes: Uint8Array): boolean {
  if (looksSealed(bytes)) return sealedContent(bytes) === 'tail';
  return bytes.byteLength >= 4 && Buffer.from(bytes.buffer, bytes.byteOffset, 4).readUInt32LE(0) === TAIL_MAGIC;
}

/** A plain block or unit tail file (magic at 0) whose header holds a key other than the one it is stored under. */
function namesOtherKey(key: string, bytes: Uint8Array): boolean {
  const view = Buffer.from(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  if (bytes.byteLength >= FIXED_HEADER_BYTES && view.readUInt32LE(0) === BLOCK_MAGIC) return view.toString('hex', 24, 40) !== key;
  // A tail (tail-codec.ts) is a record like a block: kept under its own unit key, an orphan under any other.
  if (bytes.byteLength >= TAIL_FIXED_HEADER_BYTES && view.readUInt32LE(0) === TAIL_MAGIC) return view.toString('hex', 40, 56) !== key;
  return false;
}
