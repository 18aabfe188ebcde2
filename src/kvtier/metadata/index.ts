export {
  effectiveTtlMs,
  TAIL_TAG,
  scopeTagsOf,
  type BlockRecord,
  type MetadataPlane,
  type PlaneKind,
  type PlaneState,
  type PlaneUsage,
  type RemovedBatch,
  type RemoveOptions,
  type ScanOptions,
  type ScanPage,
} from './metadata-plane.ts';
export { LmdbMetadataPlane, type LmdbMetadataPlaneOptions } from './lmdb-metadata-plane.ts';
export { RedisMetadataPlane } from './redis-metadata-plane.ts';
export type { RedisMetadataPlaneOptions } from './redis-plane-options.ts';
export { lruScore } from './redis-plane-codec.ts';
export { openMetadataPlane, type OpenMetadataPlaneOptions } from './open-metadata-plane.ts';
