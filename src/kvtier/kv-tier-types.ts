import type { BlobStore } from '../../storage-adapters/index.ts';

import type { Clock } from './clock.ts';
import type { GcTally } from './gc.ts';
import type { KvLayout } from './kv-layout.ts';
import type { KvTierLogger } from './logger.ts';
import type { MetadataPlane } from './metadata/metadata-plane.ts';
import type { PolicyStore } from './policy-store.ts';
import type { Hash128, PrefixChain } from './prefix-hasher.ts';
import type { ReuseGapBuckets } from './reuse-gaps.ts';
import type { BlockSealer } from './seal/index.ts';

// The KvTier facade's public shapes (kv-tier.ts re-exports them; import from index.ts).

export interface KvTierOptions {
  /** This node's own directory: LMDB index at `<dataDir>/index`, and the embedded policy at `<dataDir>/policy` unless `policyStore` is given. */
  dataDir: string;
  /** Where blocks live (shared by every node). KvTier does not close it. */
  store: BlobStore;
  /** Tokens per block; default 64. Every node sharing a store must agree. */
  blockTokens?: number;
  /** Byte budget of the in-RAM LRU of verified blocks; default 256 MiB, 0 disables. */
  hotCacheBytes?: number;
  /** Most bytes of pending block writes held in memory; beyond it new blocks are dropped (and counted). Default 256 MiB. */
  writeBehindMaxBytes?: number;
  /** Block puts in flight (a write gives its slot up once its put landed, while it is recorded); default 4. */
  writeConcurrency?: number;
  /** Most landed block writes recorded in one index transaction and plane call (write-records.ts); default 256, 1 = one per block. */
  recordBatchMax?: number;
  /** On an fs store, write the blocks whose puts start in one event-loop turn in one native pool job (fs-batch-writer.ts); default false (node:fs one file at a time; KVTIER_FS_BATCH_WRITES=1 turns it on): on this box's ext4 disk it was slower (bench/RESULTS.md "replay (#29), batched file writes"). */
  fsBatchWrites?: boolean;
  /** Free recycled read buffers kept for loads (read-buffer-pool.ts); default 64 MiB, 0 = a fresh buffer per read. */
  readPoolBytes?: number;
  /** Block reads in flight per load; default 16 (an S3 GET is mostly waiting; fs reads beyond libuv's 4 threads just queue). */
  readConcurrency?: number;
  clock?: Clock;
  /** Shared retention policy; default an LmdbPolicyStore at `<dataDir>/policy` (closed by `close()`). */
  policyStore?: PolicyStore;
  logger?: KvTierLogger;
  /** A hit within this many ms of the block's last use does not rewrite its index entry. Default 60 s. */
  touchIntervalMs?: number;
  /** Keys in the first `store.has` window for blocks the local index lacks; later windows grow ×4. Default 8. */
  probeWindow?: number;
  /** Run GC on a timer every this many ms (embedded mode); off when absent or 0 (a GC worker calls `gc()`). */
  gcIntervalMs?: number;
  /** Keys remembered as live in front of the LMDB index (see LiveEntryCache); default 262144, 0 disables. */
  liveCacheEntries?: number;
  /** Encryption at rest: blocks are sealed before `store.put` and opened after `store.get` (seal/); absent = plaintext blocks. */
  seal?: BlockSealer;
  /**
   * The cluster metadata plane (metadata/): one shared record per block that
   * lookups, renewals and GC judge by. Owned by the caller when given;
   * default: Redis when `REDIS_URL` is set, else an LMDB plane at `<dataDir>/plane` (closed by `close()`).
   */
  metadataPlane?: MetadataPlane;
  /** Redis of the default plane when `metadataPlane` is not given: default `REDIS_URL`; '' = the embedded LMDB plane. */
  metadataRedisUrl?: string;
  /**
   * This node's index (node-index.ts): 'lmdb' (default), an LMDB environment
   * at `<dataDir>/index` in front of the plane; 'plane', the embedded LMDB
   * plane's records read directly (one record per block instead of two; the
   * plane must be the LMDB one, and its records then carry no hit counts).
   */
  nodeIndex?: 'lmdb' | 'plane';
  /** This node's name in plane records (`writer`); default `<hostname>:<pid>`. */
  nodeId?: string;
  /** Tests only: replace the 128-bit hash to force collisions. */
  hash128?: Hash128;
}

/** A namespace handle: pass it to lookup and store. */
export interface KvNamespace {
  /** 32 hex characters. */
  readonly key: string;
  readonly keyBytes: Uint8Array;
  readonly modelFingerprint: string;
  readonly tenantSalt: string;
  readonly formatVersion: number;
}

export interface RequestScope {
  tenant: string;
  /** A class of the retention policy, e.g. `agent` or `chat`. */
  trafficClass: string;
}

/**
 * The longest run of cached full blocks from the start of a prompt. Pass it
 * to `load`; its `chain` can be passed to `store` to skip re-hashing.
 */
export class LookupResult {
  constructor(
    readonly namespace: KvNamespace,
    readonly tokens: Uint32Array,
    readonly scope: RequestScope,
    readonly chain: PrefixChain,
    /** Cached blocks from block 0. */
    readonly hitBlocks: number,
    /** Of the hits, blocks this node's index lacked and found on storage (written by other nodes). */
    readonly adoptedBlocks: number,
  ) {}

  get blockTokens(): number {
    return this.chain.blockTokens;
  }

  /** Full blocks in the prompt. */
  get totalBlocks(): number {
    return this.chain.blockCount;
  }

  get hitTokens(): number {
    return this.hitBlocks * this.chain.blockTokens;
  }

  /** Keys of the hit blocks, in order. */
  get keys(): string[] {
    const keys = new Array<string>(this.hitBlocks);
    for (let i = 0; i < this.hitBlocks; i++) keys[i] = this.chain.keyHex(i);
    return keys;
  }
}

export interface LoadedBlock {
  key: string;
  parentKey: string;
  /** Block number in the prompt. */
  index: number;
  tokens: Uint32Array;
  /** KV exactly as the engine exported it: per layer K then V, each [kvHead][token][headDim]. 64-byte aligned view. */
  payload: Uint8Array;
  layout: KvLayout;
}

export interface LoadedBlocks {
  /** A contiguous prefix of the lookup's hits; shorter when a block failed verification or could not be read. */
  blocks: LoadedBlock[];
  tokenCount: number;
  /** Why loading stopped before the lookup's last hit, if it did. */
  stoppedAt?: { block: number; code: string };
  /**
   * Call once the payloads are imported (copied into the engine's pages):
   * their buffers are then recycled for later reads and every view of them
   * (payload, tokens) becomes empty. Optional: without it the GC frees them.
   */
  release(): void;
}

export interface StoreRequest extends RequestScope {
  namespace: KvNamespace;
  tokens: Uint32Array;
  /** First block to store (usually `lookup.hitBlocks`). Default 0. */
  fromBlock?: number;
  /**
   * One payload per block from `fromBlock`, copied before `store` returns
   * (the caller may reuse its buffers) — or a callback that produces block
   * i's payload when the writer gets to it (then `toBlock` bounds the range).
   */
  payloads: readonly Uint8Array[] | ((blockIndex: number) => Uint8Array | Promise<Uint8Array>);
  /** Exclusive end block for the callback form; default every full block. */
  toBlock?: number;
  layout: KvLayout;
  /** The lookup's chain for these tokens, to skip re-hashing. */
  chain?: PrefixChain;
  /** Client retention hint (ms after last use), already capped by the caller to what policy allows; kept in the block's plane record and honoured as a cap on the class TTL. Absent/0 = policy TTL. */
  ttlMs?: number;
}

export interface StoreReceipt {
  queued: number;
  /** Already stored or already being written. */
  duplicate: number;
  /** Refused because the write-behind budget was full. */
  dropped: number;
}

export interface KvTierStats {
  lookups: number;
  hitBlocks: number;
  missBlocks: number;
  hitTokens: number;
  missTokens: number;
  adoptedBlocks: number;
  loads: number;
  loadedBlocks: number;
  /** Hits that failed verification or could not be read at load (each cut the load short). */
  loadFailedBlocks: number;
  hotCacheHits: number;
  bytesRead: number;
  bytesWritten: number;
  blocksWritten: number;
  writeBehind: { queuedBlocks: number; queuedBytes: number; duplicateBlocks: number; droppedBlocks: number; droppedBytes: number };
  /** The hot RAM tier: entries held (`blocks` counts blocks, `tails` unit tails), their bytes, one budget for both. */
  hotCache: { blocks: number; tails?: number; bytes: number; budgetBytes: number };
  /** Recycled read buffers (read-buffer-pool.ts): reads that reused one, and the free bytes kept. */
  readBuffers?: { taken: number; reused: number; pooledBytes: number };
  gc: { runs: number; expired: GcTally; evicted: GcTally };
  /** Errors by stable code (storage faults, corrupt blocks, collisions, index faults). */
  errors: Record<string, number>;
  /** Hits by the gap since the block's previous use, per class (reuse-gaps.ts): bucket i is [edgesMs[i-1], edgesMs[i]), the last ≥ 30 d. */
  reuseGaps: { edgesMs: readonly number[]; byClass: Record<string, ReuseGapBuckets> };
  /** Prefix units (tier-units.ts): tails queued/written, lookups, hits, loads. */
  units?: UnitCounters;
}

export interface UnitCounters {
  queued: number;
  duplicate: number;
  dropped: number;
  written: number;
  bytesWritten: number;
  lookups: number;
  hits: number;
  loaded: number;
  /** Hits whose blocks or tail failed to read or verify (each a miss). */
  loadFailed: number;
  /** Tokens covered by loaded units. */
  hitTokens: number;
  /** Tails read from storage (concurrent loads of one tail share a read). */
  tailReads: number;
  /** Tails served from the hot RAM tier. */
  hotHits: number;
}
