import { join } from 'node:path';

import type { KvTierLogger } from '../logger.ts';
import { LmdbMetadataPlane } from './lmdb-metadata-plane.ts';
import type { MetadataPlane } from './metadata-plane.ts';
import { RedisMetadataPlane } from './redis-metadata-plane.ts';

export interface OpenMetadataPlaneOptions {
  /** Embedded mode: the plane lives at `<dataDir>/plane` unless `lmdbPath` says otherwise. */
  dataDir: string;
  lmdbPath?: string;
  /** Cluster mode when set (default `REDIS_URL`); '' forces embedded. */
  redisUrl?: string;
  keyPrefix?: string;
  logger?: KvTierLogger;
  /** Redis plane shards (a power of two); default KVTIER_PLANE_SHARDS, else 1. Every node of a deployment the same. */
  shards?: number;
}

/** Redis when a URL is given (or REDIS_URL is set), else LMDB beside the node's data. */
export function openMetadataPlane(options: OpenMetadataPlaneOptions): Promise<MetadataPlane> {
  const url = options.redisUrl ?? process.env.REDIS_URL;
  if (url !== undefined && url !== '') {
    const shards = options.shards ?? (process.env.KVTIER_PLANE_SHARDS ? Number(process.env.KVTIER_PLANE_SHARDS) : 1);
    return RedisMetadataPlane.open({ url, keyPrefix: options.keyPrefix, logger: options.logger, shards });
  }
  return LmdbMetadataPlane.open({ path: options.lmdbPath ?? join(options.dataDir, 'plane') });
}
