/** Messages between an engine thread and its owner (see engine-thread.ts). */
import type { Config } from '../config.ts';
import type { GcReport, KvTierStats, PurgeResult, RetentionPolicyDoc, SealKeyringSpec } from '../kvtier/index.ts';
import type { PolicyPatch } from './policy-patch.ts';
import type { JobEvent, RequestSpec } from './job.ts';

/** A cache tier admin operation, answered by the thread that owns the tier (tier-admin.ts) or, in cluster mode, through Redis. */
export interface AdminCall {
  op: 'stats' | 'getPolicy' | 'setPolicy' | 'gc' | 'purge';
  /** op setPolicy: the patch (policy-patch.ts); `force` accepts codecs past their measured bound. */
  policy?: PolicyPatch & { force?: boolean };
  /** op purge: what to remove (kvtier/purge.ts PurgeFilter) and when the operator asked (ms since the epoch). */
  filter?: { tenant?: string; trafficClass?: string; olderThanMs?: number; all?: boolean };
  at?: number;
  /** op gc: only these metadata-plane shards (a per-shard GC job under that shard's lease); default all. */
  shards?: number[];
}

/** op stats from the thread that owns the tier: its counters (null without a tier), usage, where it stores, and the thread's own figures. */
export interface TierStatsReply {
  cache: KvTierStats | null;
  usage?: { bytes: Record<string, number>; blocks: Record<string, number> };
  blockTokens?: number;
  storage?: { kind: string; location: string };
  policyStore?: string;
  /** The engine thread's extras (scheduler depth, storage faults, why the tier is closed). */
  [extra: string]: unknown;
}

/** An admin call's answer, named by its op, so a caller narrows on `op` instead of casting the result. */
export type AdminReply =
  | { op: 'stats'; result: TierStatsReply }
  | { op: 'getPolicy' | 'setPolicy'; result: RetentionPolicyDoc }
  | { op: 'gc'; result: GcReport }
  | { op: 'purge'; result: PurgeResult };

export interface EngineThreadInit {
  model: string;
  dataDir: string;
  storage: string;
  redisUrl: string | null;
  threads: number;
  blockTokens: number;
  hotCacheBytes: number;
  maxBatch: number;
  poolBytes?: number;
  /** Embedded mode: GC on a timer in the thread. */
  gcIntervalMs?: number;
  /** `auto` (default): per request, read a hit only when that is measured faster than recomputing it; `load`: always read. */
  fetchPolicy?: 'auto' | 'load';
  stepTokens?: number;
  retainSequences?: number;
  /** Speculative decoding (absent: off); `draft` loads `draftModel` as a second engine. */
  speculative?: 'off' | 'ngram' | 'draft' | 'mtp';
  draftModel?: string | null;
  /** Encryption at rest of stored blocks (absent or null: off). */
  encryption?: SealKeyringSpec | null;
  /** Prefix units (units.ts): interval in tokens and the common-prefix request count (absent: their defaults). */
  unitIntervalTokens?: number;
  unitCommonPrefixRequests?: number;
}

/** The engine thread's settings from the process config (API in embedded mode, or `kvtier worker`). */
export function engineThreadInit(config: Config, extra: Partial<EngineThreadInit> = {}): EngineThreadInit {
  return {
    model: config.model,
    dataDir: config.dataDir,
    storage: config.storage,
    redisUrl: config.redisUrl,
    // Cluster mode schedules GC as a BullMQ job (gc-schedule.ts); embedded mode on a timer here.
    gcIntervalMs: config.redisUrl ? 0 : config.gcIntervalMs,
    threads: config.threads,
    blockTokens: config.blockTokens,
    hotCacheBytes: config.hotCacheBytes,
    poolBytes: config.poolBytes,
    maxBatch: config.maxBatch,
    fetchPolicy: config.fetchPolicy,
    stepTokens: config.stepTokens,
    retainSequences: config.retainSequences,
    speculative: config.speculative,
    draftModel: config.draftModel,
    encryption: config.encryption,
    unitIntervalTokens: config.unitIntervalTokens,
    unitCommonPrefixRequests: config.unitCommonPrefixRequests,
    ...extra,
  };
}

export type ToEngineThread =
  | { type: 'submit'; job: RequestSpec }
  | { type: 'cancel'; jobId: string }
  | { type: 'admin'; requestId: number; call: AdminCall }
  | { type: 'close' };

export type FromEngineThread =
  /** policy: the tier's retention policy (absent without a tier); `policy` messages follow each change of it. */
  | { type: 'ready'; fingerprint: string; contextLength: number; modelPath: string; cacheProblem?: string; policy?: RetentionPolicyDoc }
  | { type: 'policy'; doc: RetentionPolicyDoc }
  | { type: 'event'; jobId: string; event: JobEvent }
  | { type: 'adminResult'; requestId: number; ok: true; reply: AdminReply }
  | { type: 'adminResult'; requestId: number; ok: false; error: { code: string; message: string } }
  | { type: 'log'; level: 'info' | 'warn' | 'error'; message: string }
  | { type: 'fatal'; error: { code: string; message: string } }
  | { type: 'closed' };

/** A thrown value as it crosses to the owner: its code (KVT_ERR_INTERNAL when it has none) and message. */
export function wireError(error: unknown): { code: string; message: string } {
  const code = error instanceof Error && 'code' in error && typeof error.code === 'string' ? error.code : 'KVT_ERR_INTERNAL';
  return { code, message: error instanceof Error ? error.message : String(error) };
}
