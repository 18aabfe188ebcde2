import { hostname } from 'node:os';
import { join } from 'node:path';

import type { BlobStore } from '../../storage-adapters/index.ts';

import { BlockCodec, PAYLOAD_OFFSET_FIELD, type DecodedBlock } from './block-codec.ts';
import type { BlockCodecName } from './codecs/kv-codecs.ts';
import { BlockIndex, PROBE_ABSENT, PROBE_EXPIRED } from './block-index.ts';
import { systemClock, type Clock } from './clock.ts';
import { BlockError, errorCodeOf, KvTierConfigError, KvTierError } from './errors.ts';
import { runGc, type GcOptions, type GcReport, type GcTally } from './gc.ts';
import { purgeIndex, type PurgeFilter, type PurgeProgress, type PurgeResult } from './purge.ts';
import { HotBlockCache } from './hot-block-cache.ts';
import { BlockReadBuffers, releaserOf } from './load-buffers.ts';
import { ReadBufferPool, type BufferLease } from './read-buffer-pool.ts';
import { LiveEntryCache } from './live-entry-cache.ts';
import type { MetadataPlane } from './metadata/metadata-plane.ts';
import { openMetadataPlane } from './metadata/open-metadata-plane.ts';
import { PlaneLink } from './plane-link.ts';
import { assertValidLayout, payloadBytesFor, type KvLayout } from './kv-layout.ts';
import { stderrLogger, type KvTierLogger } from './logger.ts';
import { LmdbPolicyStore, type PolicyStore } from './policy-store.ts';
import { BLOCK_FORMAT_VERSION, hexToKeyBytes, PrefixHasher, type Hash128, type NamespaceSpec, type PrefixChain } from './prefix-hasher.ts';
import { assertTenantName, type RetentionPolicy } from './retention-policy.ts';
import { WriteBehindQueue } from './write-behind-queue.ts';
import { openStoredHashed, type BlockSealer, type TailChecksum } from './seal/index.ts';

const MIB = 1024 * 1024;

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
  /** Block writes in flight; default 4. */
  writeConcurrency?: number;
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
  hotCache: { blocks: number; bytes: number; budgetBytes: number };
  /** Recycled read buffers (read-buffer-pool.ts): reads that reused one, and the free bytes kept. */
  readBuffers?: { taken: number; reused: number; pooledBytes: number };
  gc: { runs: number; expired: GcTally; evicted: GcTally };
  /** Errors by stable code (storage faults, corrupt blocks, collisions, index faults). */
  errors: Record<string, number>;
}

/** Lookup stop reason: the node index threw; neither the plane nor storage is asked (it would go around a broken cache). */
const PROBE_INDEX_BROKEN = -3;

/** Verification failures that mean the stored file itself is bad (deleted); the others are collisions (kept for their owner). */
const CORRUPT_CODES = new Set<string>([
  'KVT_ERR_BLOCK_TRUNCATED',
  'KVT_ERR_BLOCK_BAD_MAGIC',
  'KVT_ERR_BLOCK_VERSION',
  'KVT_ERR_BLOCK_HEADER_CHECKSUM',
  'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM',
  'KVT_ERR_BLOCK_MALFORMED',
  'KVT_ERR_BLOCK_KEY_MISMATCH',
]);

/**
 * The KV block tier: prefix hashing, verified block load, write-behind store,
 * retention and GC, over any BlobStore.
 *
 * ```
 * lookup(ns, tokens) ──hash──▶ key_0 … key_n ──local LMDB index──▶ hits
 *                                    └─ keys the index lacks ──store.has (windowed)──▶ adopted hits
 * load(lookup) ──hot LRU / store.get──▶ decode + verify (key, parent, tokens, fingerprint, checksums)
 * store(blocks) ──encode──▶ write-behind queue ──store.put──▶ index
 * ```
 *
 * Storage and index faults never throw from lookup/load/store: they count in
 * `stats().errors` and cost a miss. Bad arguments throw typed errors.
 */
export class KvTier {
  readonly policy: PolicyStore;
  /** The blob store blocks live in (owned by the caller). */
  readonly blobStore: BlobStore;
  readonly blockTokens: number;
  private readonly counters: KvTierStats;
  private readonly hotCache: HotBlockCache;
  private readonly readPool: ReadBufferPool;
  private readonly liveEntries: LiveEntryCache;
  private readonly writes: WriteBehindQueue;
  private readonly background = new Set<Promise<unknown>>();
  /**
   * Encoded blocks queued for writing, until their index entry is committed.
   * Lookups continue into them and loads read them, so a request arriving
   * right after the one that computed a prefix reuses it (single flight)
   * instead of computing it again while the write is in flight.
   */
  private readonly pending = new Map<string, Uint8Array>();
  private readonly lastLoggedAt = new Map<string, number>();
  private gcRunning: Promise<GcReport> | undefined;
  private gcTimer: NodeJS.Timeout | undefined;
  private closed = false;
  /** Set by `open` (plane hook): the node index is a cache in front of it. */
  private planeLink!: PlaneLink;
  private unsubscribePlane: () => void = () => undefined;

  private constructor(
    private readonly options: KvTierOptions,
    private readonly hasher: PrefixHasher,
    private readonly codec: BlockCodec,
    private readonly index: BlockIndex,
    policy: PolicyStore,
    private readonly ownsPolicy: boolean,
    private readonly clock: Clock,
    private readonly logger: KvTierLogger,
  ) {
    this.policy = policy;
    this.blobStore = options.store;
    this.blockTokens = hasher.blockTokens;
    this.hotCache = new HotBlockCache(options.hotCacheBytes ?? 256 * MIB);
    this.readPool = new ReadBufferPool(options.readPoolBytes ?? 64 * MIB);
    this.liveEntries = new LiveEntryCache(index, options.liveCacheEntries ?? 262_144);
    this.writes = new WriteBehindQueue(options.writeBehindMaxBytes ?? 256 * MIB, options.writeConcurrency ?? 4, (error) =>
      this.noteError(error, 'write-behind job threw'),
    );
    this.counters = {
      lookups: 0,
      hitBlocks: 0,
      missBlocks: 0,
      hitTokens: 0,
      missTokens: 0,
      adoptedBlocks: 0,
      loads: 0,
      loadedBlocks: 0,
      loadFailedBlocks: 0,
      hotCacheHits: 0,
      bytesRead: 0,
      bytesWritten: 0,
      blocksWritten: 0,
      writeBehind: { queuedBlocks: 0, queuedBytes: 0, duplicateBlocks: 0, droppedBlocks: 0, droppedBytes: 0 },
      hotCache: { blocks: 0, bytes: 0, budgetBytes: this.hotCache.budgetBytes },
      gc: { runs: 0, expired: { blocks: 0, bytes: 0 }, evicted: { blocks: 0, bytes: 0 } },
      errors: {},
    };
    if (options.gcIntervalMs !== undefined && options.gcIntervalMs > 0) {
      this.gcTimer = setInterval(() => {
        this.gc().catch((error: unknown) => this.noteError(error, 'timed GC failed'));
      }, options.gcIntervalMs);
      this.gcTimer.unref();
    }
  }

  /** Opens the index (and the embedded policy store unless one is given). */
  static async open(options: KvTierOptions): Promise<KvTier> {
    if (typeof options?.dataDir !== 'string' || options.dataDir === '') {
      throw new KvTierConfigError('dataDir', 'KvTier.open needs dataDir (this node\'s index directory), e.g. ./data');
    }
    if (options.store === undefined || typeof options.store.get !== 'function') {
      throw new KvTierConfigError('store', 'KvTier.open needs a BlobStore: await openBlobStore(process.env.KVTIER_STORAGE ?? "fs:./data/blocks")');
    }
    for (const field of ['hotCacheBytes', 'writeBehindMaxBytes', 'touchIntervalMs', 'liveCacheEntries'] as const) {
      const value = options[field];
      if (value !== undefined && (!Number.isFinite(value) || value < 0)) throw new KvTierConfigError(field, `${field} must be a number ≥ 0, got ${value}`);
    }
    if (options.gcIntervalMs !== undefined && (!Number.isInteger(options.gcIntervalMs) || options.gcIntervalMs < 0)) {
      throw new KvTierConfigError('gcIntervalMs', `gcIntervalMs must be a whole number of ms (0 = no timer), got ${options.gcIntervalMs}`);
    }
    for (const field of ['writeConcurrency', 'readConcurrency', 'probeWindow'] as const) {
      const value = options[field];
      if (value !== undefined && (!Number.isInteger(value) || value < 1)) throw new KvTierConfigError(field, `${field} must be a positive integer, got ${value}`);
    }
    const hasher = await PrefixHasher.create({ blockTokens: options.blockTokens, hash128: options.hash128 });
    const codec = await BlockCodec.create();
    const clock = options.clock ?? systemClock;
    const logger = options.logger ?? stderrLogger;
    const index = BlockIndex.open({ path: join(options.dataDir, 'index') });
    let policy = options.policyStore;
    const ownsPolicy = policy === undefined;
    try {
      policy ??= await LmdbPolicyStore.open({ path: join(options.dataDir, 'policy'), clock, logger });
    } catch (error) {
      await index.close();
      throw error;
    }
    let plane = options.metadataPlane;
    try {
      plane ??= await openMetadataPlane({ dataDir: options.dataDir, redisUrl: options.metadataRedisUrl, logger });
    } catch (error) {
      if (ownsPolicy) await policy.close();
      await index.close();
      throw error;
    }
    const tier = new KvTier(options, hasher, codec, index, policy, ownsPolicy, clock, logger);
    tier.attachPlane(plane, options.metadataPlane === undefined);
    return tier;
  }

  /** The cluster metadata plane this tier records into (purge, cluster stats). */
  get plane(): MetadataPlane {
    return this.planeLink.plane;
  }

  /** A namespace: model fingerprint + tenant salt + block format version. */
  namespace(spec: NamespaceSpec): KvNamespace {
    const keyBytes = this.hasher.namespaceKeyBytes(spec);
    return Object.freeze({
      key: Buffer.from(keyBytes).toString('hex'),
      keyBytes,
      modelFingerprint: spec.modelFingerprint,
      tenantSalt: spec.tenantSalt,
      formatVersion: spec.formatVersion ?? BLOCK_FORMAT_VERSION,
    });
  }

  /**
   * Longest run of cached full blocks from the start of `tokens`. Never
   * throws for storage or index faults (they count as errors and end the
   * run); throws KvTierConfigError / PolicyError for bad arguments.
   */
  async lookup(namespace: KvNamespace, tokens: Uint32Array, scope: RequestScope, given?: PrefixChain): Promise<LookupResult> {
    this.assertOpen();
    const policy = this.policy.current();
    this.assertScope(scope, policy);
    // The caller's chain of these tokens (a request's prompt is hashed once, at admission), if its root is this namespace's.
    const chain =
      given !== undefined &&
      given.blockTokens === this.blockTokens &&
      given.blockCount === Math.floor(tokens.length / this.blockTokens) &&
      Buffer.from(given.rootKey).equals(this.hasher.chain(namespace.keyBytes, new Uint32Array(0)).rootKey)
        ? given
        : this.hasher.chain(namespace.keyBytes, tokens);
    const now = this.clock.now();
    const touchIntervalMs = this.options.touchIntervalMs ?? 60_000;
    const blockCount = chain.blockCount;
    let hits = 0;
    let stop = PROBE_ABSENT;
    const stale: number[] = [];
    try {
      for (; hits < blockCount; hits++) {
        const lastUse = this.liveEntries.probeBlock(chain, hits, now, policy);
        if (lastUse === PROBE_ABSENT && this.pending.has(chain.keyHex(hits))) continue;
        if (lastUse < 0) {
          stop = lastUse;
          break;
        }
        if (now - lastUse >= touchIntervalMs) stale.push(hits);
      }
    } catch (error) {
      this.noteError(error, 'index probe failed; treating the rest as a miss');
      stop = PROBE_INDEX_BROKEN; // do not go around a broken index to storage
    }
    let adopted = 0;
    if (hits < blockCount && stop !== PROBE_INDEX_BROKEN) {
      // The plane knows what other nodes wrote and used (plane-link.ts).
      const fromPlane = await this.planeLink.probe(chain, hits, now, policy);
      hits += fromPlane.found;
      adopted += fromPlane.found;
      // Without a trusted plane: an absent entry may be another node's block on storage; an
      // expired local entry ends the run (its blob may still be on storage until GC runs).
      if (!fromPlane.trusted && hits < blockCount && (stop === PROBE_ABSENT || fromPlane.found > 0)) {
        const fromStorage = await this.probeStorage(chain, hits, scope, now, policy);
        hits += fromStorage;
        adopted += fromStorage;
      }
    }
    if (stale.length > 0) {
      this.track(
        this.index.touch(
          stale.map((i) => chain.keyBytes(i).slice()),
          now,
          policy,
        ),
        'index touch failed',
      );
      for (const i of stale) this.liveEntries.renewed(chain.keyHex(i), now);
      this.planeLink.renew(
        stale.map((i) => chain.keyHex(i)),
        now,
        stale,
      );
    }
    const c = this.counters;
    c.lookups++;
    c.hitBlocks += hits;
    c.missBlocks += blockCount - hits;
    c.hitTokens += hits * chain.blockTokens;
    c.missTokens += tokens.length - hits * chain.blockTokens;
    c.adoptedBlocks += adopted;
    return new LookupResult(namespace, tokens, { tenant: scope.tenant, trafficClass: scope.trafficClass }, chain, hits, adopted);
  }

  /**
   * Reads and verifies the lookup's hits (hot cache first). Every block is
   * checked: its key, parent key, tokens, model fingerprint, layout and
   * checksums. The first failure ends the result there (a contiguous prefix
   * is still returned): a corrupt file is deleted, a hash collision is left
   * for the prefix that owns it, a storage fault is counted. Never throws.
   * With `fromBlock`, only blocks [fromBlock, hits) are read (blocks[0] is
   * block fromBlock).
   */
  async load(lookup: LookupResult, options: { fromBlock?: number } = {}): Promise<LoadedBlocks> {
    this.assertOpen();
    this.counters.loads++;
    const { chain, hitBlocks } = lookup;
    // A caller that holds the first blocks already (a retained sequence) reads only the rest.
    const fromBlock = Math.min(hitBlocks, Math.max(0, Math.floor(options.fromBlock ?? 0)));
    const sizes: { keyBytes: Uint8Array; sizeBytes: number }[] = [];
    const concurrency = this.options.readConcurrency ?? 16;
    const results = new Array<LoadedBlock | { failed: string }>(hitBlocks);
    // Sliding window, in order: block i+concurrency starts as soon as any
    // read finishes; nothing past the first failure is started.
    let next = fromBlock;
    let firstFailure = hitBlocks;
    const worker = async () => {
      for (;;) {
        const i = next++;
        if (i >= hitBlocks || i >= firstFailure) return;
        const result = await this.loadOne(lookup, i, sizes);
        results[i] = result;
        if ('failed' in result && i < firstFailure) firstFailure = i;
      }
    };
    await Promise.all(Array.from({ length: Math.min(concurrency, hitBlocks - fromBlock) }, worker));
    const blocks = results.slice(fromBlock, firstFailure) as LoadedBlock[];
    // Blocks read past a failure are not returned: let go of their buffers now.
    for (let i = firstFailure + 1; i < hitBlocks; i++) leaseOf.get(results[i] as LoadedBlock)?.unref();
    let stoppedAt: LoadedBlocks['stoppedAt'];
    if (firstFailure < hitBlocks) {
      stoppedAt = { block: firstFailure, code: (results[firstFailure] as { failed: string }).failed };
      this.counters.loadFailedBlocks += hitBlocks - firstFailure;
    }
    if (sizes.length > 0) this.track(this.index.noteSizes(sizes), 'index size update failed');
    this.counters.loadedBlocks += blocks.length;
    const loaded: LoadedBlocks = { blocks, tokenCount: blocks.length * chain.blockTokens, release: releaserOf(blocks.map((block) => leaseOf.get(block))) };
    if (stoppedAt !== undefined) loaded.stoppedAt = stoppedAt;
    return loaded;
  }

  /**
   * Queues new full blocks for writing and returns at once. Memory is
   * bounded by `writeBehindMaxBytes`: a block that does not fit is dropped
   * and counted, never waited for. Keys already stored or in flight are
   * skipped. Throws only for bad arguments (checked before anything is queued).
   */
  store(request: StoreRequest): StoreReceipt {
    this.assertOpen();
    const policy = this.policy.current();
    this.assertScope(request, policy);
    const { namespace, tokens, layout } = request;
    const storeCodec = policy.codecFor(request.trafficClass);
    try {
      assertValidLayout(layout);
    } catch (error) {
      throw new KvTierConfigError('layout', (error as Error).message, 'KVT_ERR_KVTIER_BAD_REQUEST');
    }
    if (layout.tokensPerBlock !== this.blockTokens) {
      throw new KvTierConfigError('layout', `layout.tokensPerBlock is ${layout.tokensPerBlock} but this tier cuts blocks of ${this.blockTokens} tokens`, 'KVT_ERR_KVTIER_BAD_REQUEST');
    }
    if (!(tokens instanceof Uint32Array)) throw new KvTierConfigError('tokens', 'tokens must be a Uint32Array', 'KVT_ERR_KVTIER_BAD_REQUEST');
    const fullBlocks = Math.floor(tokens.length / this.blockTokens);
    const fromBlock = request.fromBlock ?? 0;
    const payloads = request.payloads;
    const toBlock = typeof payloads === 'function' ? Math.min(request.toBlock ?? fullBlocks, fullBlocks) : fromBlock + payloads.length;
    if (!Number.isInteger(fromBlock) || fromBlock < 0 || toBlock > fullBlocks || toBlock < fromBlock) {
      throw new KvTierConfigError(
        'fromBlock',
        `blocks ${fromBlock}..${toBlock} are not within the ${fullBlocks} full blocks of ${tokens.length} tokens (only full blocks are stored)`,
        'KVT_ERR_KVTIER_BAD_REQUEST',
      );
    }
    const payloadBytes = payloadBytesFor(layout, this.blockTokens);
    if (typeof payloads !== 'function') {
      payloads.forEach((payload, i) => {
        if (!(payload instanceof Uint8Array) || payload.byteLength !== payloadBytes) {
          throw new KvTierConfigError(
            'payloads',
            `payload ${i} (block ${fromBlock + i}) is ${payload?.byteLength} bytes; layout needs ${payloadBytes} per block (per layer K then V, [kvHead][token][headDim])`,
            'KVT_ERR_KVTIER_BAD_REQUEST',
          );
        }
      });
    }
    const chain =
      request.chain !== undefined && request.chain.blockCount >= toBlock && request.chain.blockTokens === this.blockTokens
        ? request.chain
        : this.hasher.chain(namespace.keyBytes, tokens, toBlock);
    const receipt: StoreReceipt = { queued: 0, duplicate: 0, dropped: 0 };
    const now = this.clock.now();
    const estimate = payloadBytes + 1024 + namespace.modelFingerprint.length;
    for (let i = fromBlock; i < toBlock; i++) {
      const key = chain.keyHex(i);
      if (this.writes.has(key) || this.isStoredLive(key, chain.keyBytes(i), now, policy)) {
        receipt.duplicate++;
        continue;
      }
      if (!this.writes.fits(estimate)) {
        receipt.dropped++;
        this.counters.writeBehind.droppedBlocks++;
        this.counters.writeBehind.droppedBytes += payloadBytes;
        continue;
      }
      const blockTokens = tokens.subarray(i * this.blockTokens, (i + 1) * this.blockTokens);
      const encodeWith = (payload: Uint8Array) =>
        this.codec.encode({ key: chain.keyBytes(i), parentKey: chain.parentKeyBytes(i), modelFingerprint: namespace.modelFingerprint, tokens: blockTokens, layout, payload });
      let run: () => Promise<void>;
      let encoded: Uint8Array | undefined;
      if (typeof payloads === 'function') {
        // The callback form reads the caller's tokens later: keep our own copy of this block's.
        const ownTokens = blockTokens.slice();
        const keyBytes = chain.keyBytes(i).slice();
        const parentKeyBytes = chain.parentKeyBytes(i).slice();
        run = async () => {
          let bytes: Uint8Array;
          try {
            const payload = await payloads(i);
            bytes = this.codec.encode({ key: keyBytes, parentKey: parentKeyBytes, modelFingerprint: namespace.modelFingerprint, tokens: ownTokens, layout, payload }, storeCodec);
          } catch (error) {
            this.noteError(error, `payload callback for block ${i} failed; block not stored`);
            return;
          }
          await this.writeBlock(key, keyBytes, bytes, i, request);
        };
      } else {
        const bytes = encodeWith(payloads[i - fromBlock]);
        encoded = bytes;
        const keyBytes = chain.keyBytes(i).slice();
        run = async () => this.writeBlock(key, keyBytes, await this.compressForStore(bytes, storeCodec), i, request);
      }
      const outcome = this.writes.offer({ key, bytes: estimate, run });
      if (outcome === 'queued') {
        if (encoded !== undefined) this.pending.set(key, encoded);
        receipt.queued++;
        this.counters.writeBehind.queuedBlocks++;
      } else if (outcome === 'duplicate') receipt.duplicate++;
      else {
        receipt.dropped++;
        this.counters.writeBehind.droppedBlocks++;
        this.counters.writeBehind.droppedBytes += payloadBytes;
      }
    }
    this.counters.writeBehind.duplicateBlocks += receipt.duplicate;
    return receipt;
  }

  /** Waits until every queued write and index update has finished. */
  async flush(): Promise<void> {
    await this.writes.drain();
    while (this.background.size > 0) await Promise.allSettled([...this.background]);
    // Plane hook: buffered renewals reach the shared records (other nodes, GC) now rather than within a second.
    await this.planeLink.plane.flush().catch((error: unknown) => this.noteError(error, 'flushing plane renewals failed'));
  }

  /** Counters since open, plus the current queue and cache sizes. */
  stats(): KvTierStats {
    const snapshot = structuredClone(this.counters);
    snapshot.writeBehind.queuedBytes = this.writes.queuedBytes;
    snapshot.hotCache = { blocks: this.hotCache.size, bytes: this.hotCache.usedBytes, budgetBytes: this.hotCache.budgetBytes };
    snapshot.readBuffers = { taken: this.readPool.counts.taken, reused: this.readPool.counts.reused, pooledBytes: this.readPool.pooledBytes };
    return snapshot;
  }

  /**
   * Removes the blocks of this node's index that match `filter` (as of `at`,
   * default now) from storage, the index and this node's memory caches.
   * Queued writes land first, so none of them reappears after the purge.
   */
  async purge(filter: PurgeFilter, options: { at?: number; onProgress?: (progress: PurgeProgress) => void } = {}): Promise<PurgeResult> {
    this.assertOpen();
    await this.flush();
    const forget = (keys: string[]) => {
      for (const key of keys) {
        this.hotCache.delete(key);
        this.liveEntries.forget(key);
      }
    };
    return purgeIndex({ index: this.index, store: this.blobStore, forget }, filter, options.at ?? this.clock.now(), options.onProgress);
  }

  /** Blocks and bytes this node's index holds, by scope tag ("g", "c:chat", "t:acme"). */
  usage(): { bytes: Record<string, number>; blocks: Record<string, number> } {
    return this.index.usage();
  }

  /** Runs GC under the current policy (one run at a time; a second call joins the first). */
  gc(options: GcOptions = {}): Promise<GcReport> {
    this.assertOpen();
    if (this.gcRunning !== undefined) return this.gcRunning;
    const run = this.planeLink
      .plane.flush()
      .catch((error: unknown) => this.noteError(error, 'flushing plane renewals before GC failed'))
      .then(() =>
        runGc(
          {
            plane: this.planeLink.plane,
            index: this.index,
            store: this.blobStore,
            policy: this.policy.current(),
            clock: this.clock,
            onRemoved: (keys) => this.dropLocal(keys),
          },
          options,
        ),
      )
      .then(async (report) => {
      this.planeLink.noteState(report.plane.trusted);
      // Removals reach this node's index through dropLocal; let them land before reporting.
      while (this.background.size > 0) await Promise.allSettled([...this.background]);
      const gc = this.counters.gc;
      gc.runs++;
      if (!report.dryRun) {
        for (const reason of ['expired', 'evicted'] as const) {
          gc[reason].blocks += report.removed[reason].blocks;
          gc[reason].bytes += report.removed[reason].bytes;
        }
      }
      for (const error of report.errors) this.noteError(error, 'GC: ' + error.message);
      return report;
    });
    this.gcRunning = run;
    const clear = () => {
      this.gcRunning = undefined;
    };
    run.then(clear, clear);
    return run;
  }

  /** Flushes pending writes, then closes the index (and the policy store it opened). The BlobStore stays open. */
  async close(): Promise<void> {
    if (this.closed) return;
    if (this.gcTimer !== undefined) clearInterval(this.gcTimer);
    await this.flush();
    await this.gcRunning?.catch(() => undefined);
    this.closed = true;
    this.hotCache.clear();
    this.readPool.clear();
    this.liveEntries.clear();
    if (this.ownsPolicy) await this.policy.close();
    this.unsubscribePlane();
    await this.planeLink.close();
    await this.index.close();
  }

  /** Plane hook: link the plane and drop blocks any node removes from it. */
  private attachPlane(plane: MetadataPlane, owned: boolean): void {
    this.planeLink = new PlaneLink(plane, owned, this.options.nodeId ?? `${hostname()}:${process.pid}`, this.index, (error, what) => this.noteError(error, what), this.options.probeWindow ?? 8);
    this.unsubscribePlane = plane.onRemoved((keys) => this.dropLocal(keys));
  }

  /** Forgets blocks removed from the plane (by this node or another): caches, then this node's index. */
  private dropLocal(keys: readonly string[]): void {
    if (this.closed) return;
    for (const key of keys) {
      this.hotCache.delete(key);
      this.liveEntries.forget(key);
    }
    this.track(this.index.remove(keys.map((key) => hexToKeyBytes(key))), 'index remove after a plane removal failed');
  }

  // ── internals ──────────────────────────────────────────────────────────

  /** Windowed `has` over the keys the index lacks: 8, 32, 128, … keys per round trip. Returns how many contiguous blocks exist. */
  private async probeStorage(chain: PrefixChain, from: number, scope: RequestScope, now: number, policy: RetentionPolicy): Promise<number> {
    let window = this.options.probeWindow ?? 8;
    let position = from;
    const found: { keyBytes: Uint8Array; trafficClass: string; tenant: string; depth: number }[] = [];
    while (position < chain.blockCount) {
      const end = Math.min(chain.blockCount, position + window);
      const keys: string[] = [];
      for (let i = position; i < end; i++) keys.push(chain.keyHex(i));
      let present: boolean[];
      try {
        present = await this.blobStore.has(keys);
      } catch (error) {
        this.noteError(error, 'storage has() failed; treating the rest as a miss');
        break;
      }
      let run = 0;
      while (run < present.length && present[run]) run++;
      for (let i = position; i < position + run; i++) {
        found.push({ keyBytes: chain.keyBytes(i).slice(), trafficClass: scope.trafficClass, tenant: scope.tenant, depth: i });
      }
      position += run;
      if (run < present.length) break;
      window *= 4;
    }
    if (found.length > 0) this.track(this.index.adopt(found, now, policy), 'index adopt failed');
    return found.length;
  }

  private async loadOne(lookup: LookupResult, i: number, sizes: { keyBytes: Uint8Array; sizeBytes: number }[]): Promise<LoadedBlock | { failed: string }> {
    const key = lookup.chain.keyHex(i);
    const cached = this.hotCache.get(key);
    if (cached !== undefined) {
      const problem = this.verify(cached, lookup, i);
      if (problem === undefined && cached.lease?.released !== true) {
        this.counters.hotCacheHits++;
        return toLoaded(cached, i);
      }
      this.hotCache.delete(key);
    }
    let bytes: Uint8Array | null | undefined = this.pending.get(key);
    const fromPending = bytes !== undefined;
    const buffers = new BlockReadBuffers(this.readPool);
    try {
      bytes ??= await this.blobStore.get(key, { allocate: buffers.allocate });
    } catch (error) {
      this.noteError(error, 'storage get() failed; the load ends at this block');
      return { failed: errorCodeOf(error) };
    }
    if (bytes === null) {
      // Deleted by another node's GC (or by hand): forget it here too.
      this.noteError(new BlockError('KVT_ERR_BLOCK_MISSING', `block ${key} is in the index but not on storage`), 'block vanished from storage');
      this.liveEntries.forget(key);
      this.track(this.index.remove([lookup.chain.keyBytes(i).slice()]), 'index remove failed');
      this.track(this.planeLink.forget([key]), 'plane remove of a vanished block failed');
      return { failed: 'KVT_ERR_BLOCK_MISSING' };
    }
    if (!fromPending) {
      this.counters.bytesRead += bytes.byteLength;
      buffers.own(bytes);
    }
    // Encryption at rest (seal/): a blob that does not open is a miss and is kept (the keyring may be what is wrong).
    let plain = bytes;
    let payloadChecksum: TailChecksum | undefined;
    if (!fromPending) {
      try {
        // A large sealed block comes back with its payload checksum, hashed as it was decrypted.
        ({ plain, tail: payloadChecksum } = await openStoredHashed(this.options.seal, bytes, lookup.chain.keyBytes(i), lookup.namespace.tenantSalt, { offsetField: PAYLOAD_OFFSET_FIELD, seed: 0n }));
        // Decrypted in place, or into a fresh buffer of its own (an open thread's).
        buffers.own(plain, plain.buffer !== bytes.buffer);
      } catch (error) {
        buffers.discard();
        this.noteError(error, 'stored block did not open (encryption at rest); treated as a miss');
        return { failed: errorCodeOf(error) };
      }
    }
    let block: DecodedBlock;
    try {
      block = this.codec.decode(plain, { allocatePayload: buffers.allocate, payloadChecksum });
    } catch (error) {
      buffers.discard();
      this.discardCorrupt(key, lookup.chain.keyBytes(i), error);
      return { failed: errorCodeOf(error) };
    }
    buffers.attach(block);
    const problem = this.verify(block, lookup, i);
    if (problem !== undefined) {
      block.lease?.discardUnheld();
      if (CORRUPT_CODES.has(problem.code)) this.discardCorrupt(key, lookup.chain.keyBytes(i), problem);
      else this.noteError(problem, 'block does not belong to this prefix (hash collision); treated as a miss');
      return { failed: problem.code };
    }
    // Only adopted blocks lack a size in the index: a hit on any other costs no LMDB write.
    if (!fromPending && i >= lookup.hitBlocks - lookup.adoptedBlocks) sizes.push({ keyBytes: lookup.chain.keyBytes(i).slice(), sizeBytes: bytes.byteLength });
    this.hotCache.put(block);
    return toLoaded(block, i);
  }

  /** Checks a decoded block against the prefix it is meant to continue. */
  private verify(block: DecodedBlock, lookup: LookupResult, i: number): BlockError | undefined {
    const { chain, tokens, namespace } = lookup;
    if (block.key !== chain.keyHex(i)) return new BlockError('KVT_ERR_BLOCK_KEY_MISMATCH', `file for ${chain.keyHex(i)} holds block ${block.key}`);
    if (block.parentKey !== chain.parentKeyHex(i)) {
      return new BlockError('KVT_ERR_BLOCK_PARENT_MISMATCH', `block ${block.key} continues ${block.parentKey}, not ${chain.parentKeyHex(i)}`);
    }
    if (block.modelFingerprint !== namespace.modelFingerprint) {
      return new BlockError('KVT_ERR_BLOCK_FINGERPRINT_MISMATCH', `block ${block.key} was made by model ${block.modelFingerprint}`);
    }
    const B = chain.blockTokens;
    if (block.tokens.length !== B || block.layout.tokensPerBlock !== B) {
      return new BlockError('KVT_ERR_BLOCK_LAYOUT_MISMATCH', `block ${block.key} holds ${block.tokens.length} tokens, expected ${B}`);
    }
    const offset = i * B;
    for (let t = 0; t < B; t++) {
      if (block.tokens[t] !== tokens[offset + t]) return new BlockError('KVT_ERR_BLOCK_TOKEN_MISMATCH', `block ${block.key} holds other tokens (hash collision)`);
    }
    return undefined;
  }

  private discardCorrupt(key: string, keyBytes: Uint8Array, error: unknown): void {
    this.noteError(error, 'corrupt block deleted; treated as a miss');
    this.hotCache.delete(key);
    this.liveEntries.forget(key);
    const ownKey = keyBytes.slice();
    this.track(
      (async () => {
        await this.blobStore.delete([key]);
        await this.index.remove([ownKey]);
        await this.planeLink.forget([key]);
      })(),
      'deleting a corrupt block failed',
    );
  }

  private async writeBlock(key: string, keyBytes: Uint8Array, bytes: Uint8Array, depth: number, request: StoreRequest): Promise<void> {
    try {
      await this.writeBlockNow(key, keyBytes, bytes, depth, request);
    } finally {
      // Only now that the index knows it (or the write failed).
      this.pending.delete(key);
    }
  }

  private async writeBlockNow(key: string, keyBytes: Uint8Array, bytes: Uint8Array, depth: number, request: StoreRequest): Promise<void> {
    let stored = bytes;
    try {
      if (this.options.seal !== undefined) stored = this.options.seal.seal(bytes, keyBytes, request.namespace.tenantSalt);
      await this.blobStore.put(key, stored);
    } catch (error) {
      this.noteError(error, 'block write failed; block not stored');
      return;
    }
    this.counters.bytesWritten += stored.byteLength;
    this.counters.blocksWritten++;
    try {
      await this.index.recordWrites(
        [{ keyBytes, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlCapMs: request.ttlMs }],
        this.clock.now(),
        this.policy.current(),
      );
      this.liveEntries.forget(key);
    } catch (error) {
      // The blob is on storage; a later lookup adopts it.
      this.noteError(error, 'index update after a block write failed');
    }
    await this.planeLink.recordWrite(
      { key, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlMs: request.ttlMs },
      this.clock.now(),
    );
    if (this.hotCache.budgetBytes > 0) {
      try {
        this.hotCache.put(this.codec.decode(bytes));
      } catch (error) {
        this.noteError(error, 'a block we just encoded does not decode');
      }
    }
  }

  /**
   * Codec hook (codecs/): the block re-encoded under the policy's codec, in
   * the write-behind job after a setImmediate yield (the queue starts a job
   * inside `offer`, so without it the request would pay for compression).
   * Until the write lands, `pending` serves the raw block. A failure stores it uncompressed.
   */
  private async compressForStore(bytes: Uint8Array, codec: BlockCodecName): Promise<Uint8Array> {
    if (codec === 'none') return bytes;
    await new Promise<void>((resolve) => setImmediate(resolve));
    try {
      return this.codec.recode(bytes, codec);
    } catch (error) {
      this.noteError(error, `compressing a block under ${codec} failed; stored uncompressed`);
      return bytes;
    }
  }

  private isStoredLive(key: string, keyBytes: Uint8Array, now: number, policy: RetentionPolicy): boolean {
    try {
      return this.liveEntries.probe(key, keyBytes, now, policy) >= 0;
    } catch (error) {
      this.noteError(error, 'index probe failed');
      return false;
    }
  }

  private assertScope(scope: RequestScope, policy: RetentionPolicy): void {
    try {
      assertTenantName(scope?.tenant);
    } catch (error) {
      throw new KvTierConfigError('tenant', (error as Error).message, 'KVT_ERR_KVTIER_BAD_REQUEST');
    }
    policy.assertClass(scope.trafficClass);
  }

  private track(promise: Promise<unknown>, what: string): void {
    const tracked = promise.catch((error: unknown) => this.noteError(error, what));
    this.background.add(tracked);
    void tracked.finally(() => this.background.delete(tracked));
  }

  /** Counts by code; logs the first of each code per 10 s (a dead store would otherwise log per block). */
  private noteError(error: unknown, what: string): void {
    const code = errorCodeOf(error);
    this.counters.errors[code] = (this.counters.errors[code] ?? 0) + 1;
    const now = Date.now();
    if (now - (this.lastLoggedAt.get(code) ?? -Infinity) >= 10_000) {
      this.lastLoggedAt.set(code, now);
      this.logger.warn({ code, err: (error as Error)?.message ?? String(error), count: this.counters.errors[code] }, what);
    }
  }

  private assertOpen(): void {
    if (this.closed) throw new KvTierError('KVT_ERR_KVTIER_CLOSED', 'this KvTier is closed; open a new one with KvTier.open');
  }
}

/** The lease a loaded block holds (one ref per LoadedBlock, let go by LoadedBlocks.release). */
const leaseOf = new WeakMap<LoadedBlock, BufferLease>();

function toLoaded(block: DecodedBlock, index: number): LoadedBlock {
  const loaded = { key: block.key, parentKey: block.parentKey, index, tokens: block.tokens, payload: block.payload, layout: block.layout };
  if (block.lease !== undefined) {
    block.lease.ref();
    leaseOf.set(loaded, block.lease);
  }
  return loaded;
}


