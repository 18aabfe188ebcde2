/**
 * kvtier's block store: prefix hashing, block codec, LMDB index, retention,
 * GC and the `KvTier` facade. Import from here only.
 */
export { KvTier } from './kv-tier.ts';
export {
  LookupResult,
  type KvNamespace,
  type KvTierOptions,
  type KvTierStats,
  type LoadedBlock,
  type LoadedBlocks,
  type RequestScope,
  type StoreReceipt,
  type StoreRequest,
} from './kv-tier-types.ts';
export {
  BLOCK_FORMAT_VERSION,
  DEFAULT_BLOCK_TOKENS,
  KEY_BYTES,
  PrefixChain,
  PrefixHasher,
  hexToKeyBytes,
  isKeyHex,
  type Hash128,
  type NamespaceSpec,
  type PrefixHasherOptions,
} from './prefix-hasher.ts';
export { BlockFlights } from './block-flights.ts';
export type { UnitHit, UnitStoreOutcome, UnitStoreRequest } from './tier-units.ts';
export type { LoadedUnit } from './tier-unit-load.ts';
export type { UnitCounters } from './kv-tier-types.ts';
export { BlockCodec, BLOCK_MAGIC, FIXED_HEADER_BYTES, type BlockToEncode, type DecodedBlock } from './block-codec.ts';
export { PAYLOAD_ALIGNMENT } from './kv-file-frame.ts';
export { TailCodec, TAIL_MAGIC, TAIL_FORMAT_VERSION, TAIL_FIXED_HEADER_BYTES, type TailToEncode, type DecodedTail } from './tail-codec.ts';
export { TAIL_SECTION_KINDS, type TailSectionRecord, type TailSectionKind as TailRecordKind } from './tail-sections.ts';
export { KV_DTYPES, assertValidLayout, kvBytesPerToken, payloadBytesFor, sameLayout, type KvDtype, type KvLayout } from './kv-layout.ts';
export { BlockIndex, TAIL_TAG } from './block-index.ts';
export type { NodeIndex } from './node-index.ts';
export { PlaneIndex } from './plane-index.ts';
export { PROBE_ABSENT, PROBE_EXPIRED, type IndexEntry, type IndexWrite } from './block-index-records.ts';
export { scopeTag } from './block-index-rows.ts';
export {
  DAY_MS,
  HOUR_MS,
  RetentionPolicy,
  defaultPolicyDoc,
  validatePolicyDoc,
  type QuotaScope,
  type RetentionClassSpec,
  type RetentionPolicyDoc,
  type TenantOverride,
} from './retention-policy.ts';
export { LmdbPolicyStore, RedisPolicyStore, type PolicyChange, type PolicyStore, type RedisPolicyStoreOptions } from './policy-store.ts';
export { mergeGcReports, runGc, type GcDeps, type GcOptions, type GcProgress, type GcReason, type GcReport, type GcTally } from './gc.ts';
export { matchesPurge, purgeFilterProblem, purgeIndex, purgePlane, type PurgeFilter as BlockPurgeFilter, type PurgeProgress, type PurgeResult } from './purge.ts';
export {
  LmdbMetadataPlane,
  RedisMetadataPlane,
  effectiveTtlMs,
  lruScore,
  openMetadataPlane,
  scopeTagsOf,
  type BlockRecord,
  type LmdbMetadataPlaneOptions,
  type MetadataPlane,
  type OpenMetadataPlaneOptions,
  type PlaneKind,
  type PlaneState,
  type PlaneUsage,
  type RedisMetadataPlaneOptions,
  type ScanOptions,
  type ScanPage,
} from './metadata/index.ts';
export { REBUILT_TENANT } from './plane-rebuild.ts';
export { PlaneError } from './errors.ts';
export { CLUSTER_SCHEME, clusterAddress, clusterSeeds, createRedisClient, isClusterAddress, keysOnEveryPrimary, redactAddress, type RedisClient, type RedisConnectOptions } from './redis-connection.ts';
export { HotBlockCache } from './hot-block-cache.ts';
export { REUSE_GAP_BUCKETS, REUSE_GAP_EDGES_MS, ReuseGaps, reuseGapBucket, type ReuseGapBuckets } from './reuse-gaps.ts';
export { BLOCK_CODECS, isBlockCodecName, type BlockCodecName } from './codecs/kv-codecs.ts';
export { CodecGate, codecsNamedIn, type CodecPolicyPatch } from './codecs/codec-gate.ts';
export { CODEC_REL_DEV_BOUND, measureCodecQuality, type CodecProbeEngine, type CodecQuality } from './codecs/codec-quality.ts';
export { CodecError, type CodecErrorCode } from './codecs/codec-errors.ts';
export { WriteBehindQueue, type OfferOutcome, type WriteJob } from './write-behind-queue.ts';
export { ManualClock, systemClock, type Clock } from './clock.ts';
export { stderrLogger, type KvTierLogger } from './logger.ts';
export {
  BlockError,
  KvTierConfigError,
  KvTierError,
  PolicyError,
  errorCodeOf,
  type BlockErrorCode,
  type KvTierErrorCode,
} from './errors.ts';
export {
  BlockSealer,
  describeSealed,
  keyringFromSecret,
  looksSealed,
  NonceSource,
  openStored,
  parseKeyringJson,
  SealError,
  SealKeyring,
  type SealErrorCode,
  type SealKeyringSpec,
} from './seal/index.ts';
/** The largest buffer a read sizes from storage's word: pass it as store.get's maxBytes. */
export { MAX_BLOCK_READ_BYTES } from './read-buffer-pool.ts';
