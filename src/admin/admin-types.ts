/**
 * The admin operations' shapes, shared by the HTTP API (admin-routes.ts), its
 * client (src/cli/admin-client.ts) and the local data-dir twin
 * (src/cli/local-admin.ts), so `kvtier` prints the same thing either way.
 */
import type { BlockCodecName, GcProgress, GcReport, IndexEntry, RetentionPolicyDoc } from '../kvtier/index.ts';
import type { Overview, Series, WhatIf } from '../stats/index.ts';

export type PolicyEdit =
  /** TTL and/or byte quota of a class; `create` adds a class that does not exist yet. */
  /** `codec`: how the class's new blocks are stored; gated by its measured quality on the served model unless `force` (kvtier/codecs/codec-gate.ts). */
  | { op: 'setClass'; name: string; ttlMs?: number; quotaBytes?: number | null; create?: boolean; codec?: BlockCodecName; force?: boolean }
  /** The codec of new blocks: document-wide, or of one class; same gate as PUT /admin/policy {codec}. Blocks already stored keep theirs. */
  | { op: 'setCodec'; codec: BlockCodecName; trafficClass?: string; force?: boolean }
  /** A tenant override: the TTL of one class for this tenant, and/or the tenant's byte quota. */
  | { op: 'setTenant'; tenant: string; trafficClass?: string; ttlMs?: number; quotaBytes?: number | null }
  /** The whole policy back to the defaults, or only one tenant's override removed. */
  | { op: 'reset'; tenant?: string }
  | { op: 'setGlobalQuota'; quotaBytes: number | null }
  /** The longest TTL a client's retention hint may set; null: up to the class TTL. */
  | { op: 'setClientTtlMax'; ttlMs: number | null };

export interface PolicyEditResult {
  policy: RetentionPolicyDoc;
  /** True once the cache tier that serves requests and runs GC reads this version. */
  applied: boolean;
}

export interface BlockFilter {
  tenant?: string;
  trafficClass?: string;
  /** Last used more than this many ms ago. */
  olderThanMs?: number;
}

/** A listed block's file on storage (`stored=1`): what the dashboard's block table shows. */
export interface StoredSummary {
  present: boolean;
  fileBytes?: number;
  /** The envelope's algorithm and key id; null for a plaintext block. */
  encryption?: { algorithm: 'aes-256-gcm'; keyId: number; envelopeVersion: number } | null;
  /** 'tail' for a prefix unit's tail file (tail-codec.ts), else a block; absent when the file cannot be read here. */
  kind?: 'block' | 'tail';
  /** A tail's unit position p (tokens it covers). */
  unitPosition?: number;
  /** From the block header; absent when it cannot be read here (a sealed block with no keyring on this node). */
  codec?: string;
  tokenCount?: number;
  payloadBytes?: number;
  storedPayloadBytes?: number;
  problem?: { code: string; message: string };
}

export interface BlockListing {
  /** `stored` is set on the first blocks (at most MAX_STORED_SUMMARIES) when the listing asked for it. */
  /** `kind`: what the index recorded when the entry was made ('tail': a prefix unit's tail). */
  blocks: Array<Omit<IndexEntry, 'kind'> & { kind: 'block' | 'tail'; stored?: StoredSummary }>;
  /** Entries that match the filter (≥ blocks.length). */
  matched: number;
  /** Entries scanned. */
  scanned: number;
}

export interface BlockDetail {
  key: string;
  /** This node's index entry; null when only storage has the block. */
  entry: IndexEntry | null;
  /** Under the current policy. */
  ttlMs: number | null;
  expiresAt: number | null;
  expired: boolean | null;
  storage: {
    present: boolean;
    fileBytes?: number;
    /** Encryption at rest: the envelope's algorithm and key id; null for a plaintext block. A sealed block's header and tokens are not shown (only the tenant's key opens them). */
    encryption?: { algorithm: 'aes-256-gcm'; keyId: number; envelopeVersion: number } | null;
    verified?: boolean;
    problem?: { code: string; message: string };
    header?: {
      formatVersion: number;
      modelFingerprint: string;
      parentKey: string;
      tokenCount: number;
      layout: { layers: number; kvHeads: number; headDim: number; tokensPerBlock: number; dtype: string; kind?: 'kv' | 'mla' };
      payloadBytes: number;
      /** How the payload is stored (kvtier/codecs): none, int8, fp8, int4; and its stored size. */
      codec?: string;
      storedPayloadBytes?: number;
      firstTokens: number[];
    };
    /** A prefix unit's tail file (issue #26) instead of a block: the unit it completes. */
    unit?: {
      formatVersion: number;
      modelFingerprint: string;
      /** p: the tokens the unit covers; `blocks` = floor(p / tokensPerBlock) of them are in the block chain ending at `blockKey`. */
      position: number;
      blocks: number;
      blockKey: string;
      tokensPerBlock: number;
      dtype: string;
      codec: string;
      storedPayloadBytes: number;
      /** The tokens after the last full block (at most 16 shown). */
      tailTokens: number[];
      sections: Array<{ kind: string; layers: number[]; firstToken: number; tokens: number; bytes: number }>;
    };
  };
}

export type PurgeFilter = BlockFilter & { all?: boolean };

export interface PurgeReport {
  matched: number;
  removedBlocks: number;
  removedBytes: number;
  errors: { code: string; message: string }[];
  /** Each serving node's share (its own index and caches); absent with no server (kvtier --data-dir). */
  nodes?: { node: string; acknowledged: boolean; removedBlocks: number; removedBytes: number; errors?: { code: string; message: string }[] }[];
}

export interface AdminProgress {
  phase: string;
  scannedBlocks: number;
  removedBlocks: number;
  removedBytes: number;
  /** Blocks to go through, when known up front (purge). */
  totalBlocks?: number;
  elapsedMs?: number;
}

export interface OverviewResponse {
  overview: Overview;
  /** The retention what-if (src/stats/what-if.ts): per class, hits and dollars at 5 min … 7 d and the policy in force. */
  whatIf: WhatIf;
  generatedAt: number;
  source: { statsStore: 'lmdb' | 'redis'; stepMs: number; policyStore: string; policyVersion: number };
}

export interface HistoryResponse {
  series: Series;
  stepMs: number;
  /** The charted interval (whole steps; longer for long windows). */
  intervalMs: number;
  /** The window asked for, epoch ms: the charts' x range. */
  since: number;
  until: number;
}

export type { GcProgress, GcReport };

/** What `kvtier` drives, over HTTP or on a local data dir. */
export interface AdminApi {
  /** "http://127.0.0.1:8080" or "data dir /var/lib/kvtier". */
  readonly target: string;
  getPolicy(): Promise<RetentionPolicyDoc>;
  editPolicy(edit: PolicyEdit): Promise<PolicyEditResult>;
  overview(): Promise<OverviewResponse>;
  listBlocks(filter: BlockFilter & { limit: number }): Promise<BlockListing>;
  inspectBlock(key: string): Promise<BlockDetail>;
  purge(filter: PurgeFilter, onProgress: (progress: AdminProgress) => void): Promise<PurgeReport>;
  gc(options: { dryRun: boolean }, onProgress: (progress: AdminProgress) => void): Promise<GcReport>;
  close(): Promise<void>;
}
