/**
 * Server and worker configuration: environment variables, overridden by CLI
 * flags of the same names (`--port 9000`, `--kvtier-model m.gguf`, `--model`).
 * Every value is checked here, so a bad one stops the process at start with a
 * KVT_ERR_CONFIG_INVALID that names the variable, never at the first request.
 */
import { readFileSync } from 'node:fs';
import { resolve } from 'node:path';
import { availableParallelism } from 'node:os';

import { flagNames, intIn, keyring, oneOf, parseFlags, powerOfTwo, redisCluster, redisUrl } from './config-parse.ts';
import { KvtError } from './errors.ts';
import { keyringFromSecret, parseKeyringJson, type SealKeyringSpec } from './kvtier/index.ts';

export interface Config {
  host: string;
  port: number;
  dataDir: string;
  /** `fs:<dir>` or `s3://bucket/prefix?endpoint=…`. */
  storage: string;
  /** REDIS_URL (`redis://…`, one Redis) or KVTIER_REDIS_CLUSTER as `redis-cluster://host:port,…`; every Redis client is made from it by src/kvtier/redis-connection.ts. */
  redisUrl: string | null;
  /**
   * Metadata plane shards S = 2^k (KVTIER_PLANE_SHARDS, default 1), fixed per deployment; the plane reads
   * the variable itself where it is opened (src/kvtier/metadata/open-metadata-plane.ts), this validates it at start.
   */
  planeShards: number;
  model: string;
  apiKeysFile: string | null;
  adminToken: string | null;
  threads: number;
  /** Tokens per cached block (DESIGN: B = 64). */
  blockTokens: number;
  hotCacheBytes: number;
  /** Embedded mode (no REDIS_URL): the stored responses kept in this process, as JSON bytes (oldest dropped first). */
  responseMemoryBytes: number;
  /** The engine's KV pool (running sequences); requests wait for room in it. */
  poolBytes: number;
  /** Requests waiting (not yet running) before new ones get 429. */
  maxQueueDepth: number;
  /** Sequences a worker decodes together. */
  maxBatch: number;
  /** A request that has not finished by then ends with KVT_ERR_WORKER_TIMEOUT. */
  requestTimeoutMs: number;
  /** BullMQ: a job no worker picks up within this long fails the request with 503. */
  queueWaitTimeoutMs: number;
  /** BullMQ lock duration: a worker that stops renewing it (killed) loses the job to another worker. */
  jobLockMs: number;
  /** `kvtier worker`: how often it stores its heartbeat (stats, purge acknowledgements, liveness). */
  heartbeatMs: number;
  /** Jobs a `kvtier worker` process runs at once (they share one engine batch). */
  workerConcurrency: number;
  /**
   * BullMQ mode, API side: `aware` sends a job to the worker whose RAM holds
   * its prefix (src/cluster/cache-aware-router.ts), `shared` to the shared
   * queue only (first free worker), `roundrobin` to each live worker in turn
   * (the baseline cache-aware routers are measured against).
   */
  dispatch: 'aware' | 'shared' | 'roundrobin';
  /**
   * BullMQ mode: a job bound for the shared queue is handed to an idle worker
   * directly (`direct`: one Redis list pop, src/workers/direct-handoff.ts) while
   * a worker takes hand-offs, or always added to the shared BullMQ queue (`queue`).
   */
  handoff: 'direct' | 'queue';
  /** `kvtier worker`: whole jobs (`both`), or one half of a prefill/decode split. */
  role: 'both' | 'prefill' | 'decode';
  /**
   * API, split cluster: a request runs a prefill half only when at least this
   * many of its prompt tokens are cached in no worker's hot set; below it the
   * decode worker prefills them itself (0 = always split).
   */
  splitMinPrefillTokens: number;
  /** Tokens one engine step carries while several sequences share it (chunked prefill budget). */
  stepTokens: number;
  /** Finished sequences a worker keeps in its KV pool for the next turn (0 = none). */
  retainSequences: number;
  /** `auto`: read a cached block only when measured faster than recomputing it; `load`: always read. */
  fetchPolicy: 'auto' | 'load';
  /** API: a request body larger than this is refused with 413 before it is parsed. */
  maxBodyBytes: number;
  /** API: a chat or messages request with more messages than this is refused with 400 before any prompt work. */
  maxMessages: number;
  /** API: JSON nested deeper than this (tool schemas, tool inputs) is refused with 400; templates walk it recursively. */
  maxJsonDepth: number;
  logLevel: string;
  /**
   * Speculative decoding: `ngram` (drafts from the request's own context), `draft` (a draft model, `draftModel`),
   * `mtp` (the model's own MTP block drafts: deepseek4 files with nextn_predict_layers = 1, e.g.
   * synthetic:deepseek4-tiny; the draft length adapts to the measured acceptance as for the others), `off`.
   */
  speculative: 'off' | 'ngram' | 'draft' | 'mtp';
  /** The draft model of `speculative: draft`: a GGUF (or synthetic spec) with the target's vocabulary, e.g. a lower-bit copy. */
  draftModel: string | null;
  /**
   * Encryption at rest of stored KV blocks (src/kvtier/seal): the keyring from
   * KVTIER_ENCRYPTION_SECRET (one secret, key id 1) or KVTIER_ENCRYPTION_KEYRING
   * (a JSON file of key ids, for rotation); null = off (the default).
   */
  encryption: SealKeyringSpec | null;
  /** Cluster GC every this many ms (0 = off): a BullMQ job scheduler with REDIS_URL, else a timer in the engine thread. */
  gcIntervalMs: number;
  /** Prefix units (models whose state is not its blocks, issue #26): a unit every this many prompt/reply tokens (0 = none but prompt/reply ends and common prefixes). */
  unitIntervalTokens: number;
  /** Prefix units: a prefix seen in this many prompts of one tenant gets a unit (0 = no detection). */
  unitCommonPrefixRequests: number;
}

/** name of the env variable → [config key, parse]. Flags are the kebab-case of the name, with or without `kvtier-`. */
const FIELDS: Array<{ env: string; key: keyof Config; parse: (raw: string, env: string) => unknown }> = [
  { env: 'HOST', key: 'host', parse: (v) => v },
  { env: 'PORT', key: 'port', parse: (v, e) => intIn(v, e, 0, 65535) },
  { env: 'KVTIER_DATA_DIR', key: 'dataDir', parse: (v) => resolve(v) },
  { env: 'KVTIER_STORAGE', key: 'storage', parse: (v) => v },
  { env: 'REDIS_URL', key: 'redisUrl', parse: (v, e) => redisUrl(v, e) },
  { env: 'KVTIER_REDIS_CLUSTER', key: 'redisUrl', parse: (v, e) => redisCluster(v, e) },
  { env: 'KVTIER_PLANE_SHARDS', key: 'planeShards', parse: (v, e) => powerOfTwo(v, e, 256) },
  { env: 'KVTIER_MODEL', key: 'model', parse: (v) => v },
  { env: 'KVTIER_API_KEYS', key: 'apiKeysFile', parse: (v) => resolve(v) },
  { env: 'KVTIER_ADMIN_TOKEN', key: 'adminToken', parse: (v) => v },
  { env: 'KVTIER_THREADS', key: 'threads', parse: (v, e) => intIn(v, e, 1, 1024) },
  { env: 'KVTIER_BLOCK_TOKENS', key: 'blockTokens', parse: (v, e) => intIn(v, e, 1, 65536) },
  { env: 'KVTIER_POOL_BYTES', key: 'poolBytes', parse: (v, e) => intIn(v, e, 1 << 20, Number.MAX_SAFE_INTEGER) },
  { env: 'KVTIER_HOT_CACHE_BYTES', key: 'hotCacheBytes', parse: (v, e) => intIn(v, e, 0, Number.MAX_SAFE_INTEGER) },
  { env: 'KVTIER_RESPONSE_MEMORY_BYTES', key: 'responseMemoryBytes', parse: (v, e) => intIn(v, e, 0, Number.MAX_SAFE_INTEGER) },
  { env: 'KVTIER_MAX_QUEUE', key: 'maxQueueDepth', parse: (v, e) => intIn(v, e, 0, 1_000_000) },
  { env: 'KVTIER_MAX_BATCH', key: 'maxBatch', parse: (v, e) => intIn(v, e, 1, 1024) },
  { env: 'KVTIER_REQUEST_TIMEOUT_MS', key: 'requestTimeoutMs', parse: (v, e) => intIn(v, e, 100, 86_400_000) },
  { env: 'KVTIER_QUEUE_WAIT_TIMEOUT_MS', key: 'queueWaitTimeoutMs', parse: (v, e) => intIn(v, e, 100, 86_400_000) },
  { env: 'KVTIER_JOB_LOCK_MS', key: 'jobLockMs', parse: (v, e) => intIn(v, e, 500, 3_600_000) },
  // At most half the liveness window (LIVE_TTL_MS, 10 s): one lost heartbeat must not drop a live worker.
  { env: 'KVTIER_HEARTBEAT_MS', key: 'heartbeatMs', parse: (v, e) => intIn(v, e, 100, 5_000) },
  { env: 'KVTIER_WORKER_CONCURRENCY', key: 'workerConcurrency', parse: (v, e) => intIn(v, e, 1, 1024) },
  { env: 'KVTIER_DISPATCH', key: 'dispatch', parse: (v, e) => oneOf(v, e, ['aware', 'shared', 'roundrobin']) },
  { env: 'KVTIER_HANDOFF', key: 'handoff', parse: (v, e) => oneOf(v, e, ['direct', 'queue']) },
  { env: 'KVTIER_ROLE', key: 'role', parse: (v, e) => oneOf(v, e, ['both', 'prefill', 'decode']) },
  { env: 'KVTIER_SPLIT_MIN_PREFILL_TOKENS', key: 'splitMinPrefillTokens', parse: (v, e) => intIn(v, e, 0, 16_777_216) },
  { env: 'KVTIER_STEP_TOKENS', key: 'stepTokens', parse: (v, e) => intIn(v, e, 16, 65536) },
  { env: 'KVTIER_RETAIN_SEQUENCES', key: 'retainSequences', parse: (v, e) => intIn(v, e, 0, 4096) },
  { env: 'KVTIER_FETCH', key: 'fetchPolicy', parse: (v, e) => oneOf(v, e, ['auto', 'load']) },
  { env: 'KVTIER_MAX_BODY_BYTES', key: 'maxBodyBytes', parse: (v, e) => intIn(v, e, 1024, 1 << 30) },
  { env: 'KVTIER_MAX_MESSAGES', key: 'maxMessages', parse: (v, e) => intIn(v, e, 1, 10_000_000) },
  { env: 'KVTIER_MAX_JSON_DEPTH', key: 'maxJsonDepth', parse: (v, e) => intIn(v, e, 4, 10_000) },
  { env: 'KVTIER_LOG_LEVEL', key: 'logLevel', parse: (v, e) => oneOf(v, e, ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent']) },
  { env: 'KVTIER_SPECULATIVE', key: 'speculative', parse: (v, e) => oneOf(v, e, ['off', 'ngram', 'draft', 'mtp']) },
  { env: 'KVTIER_DRAFT_MODEL', key: 'draftModel', parse: (v) => v },
  { env: 'KVTIER_UNIT_INTERVAL_TOKENS', key: 'unitIntervalTokens', parse: (v, e) => intIn(v, e, 0, 16_777_216) },
  { env: 'KVTIER_UNIT_COMMON_PREFIX_REQUESTS', key: 'unitCommonPrefixRequests', parse: (v, e) => intIn(v, e, 0, 1_000_000) },
  { env: 'KVTIER_GC_INTERVAL_MS', key: 'gcIntervalMs', parse: (v, e) => intIn(v, e, 0, 30 * 86_400_000) },
  { env: 'KVTIER_ENCRYPTION_SECRET', key: 'encryption', parse: (v, e) => keyring(() => keyringFromSecret(v), e) },
  { env: 'KVTIER_ENCRYPTION_KEYRING', key: 'encryption', parse: (v, e) => keyring(() => parseKeyringJson(readFileSync(resolve(v), 'utf8'), `${e} file ${v}`), e) },
];

export function defaultConfig(): Config {
  const dataDir = resolve('./data');
  return {
    host: '127.0.0.1',
    port: 8080,
    dataDir,
    storage: '',
    redisUrl: null,
    planeShards: 1,
    model: 'synthetic:small',
    apiKeysFile: null,
    adminToken: null,
    threads: Math.max(1, availableParallelism()),
    blockTokens: 64,
    hotCacheBytes: 512 * 1024 * 1024,
    responseMemoryBytes: 32 * 1024 * 1024,
    poolBytes: 1024 * 1024 * 1024,
    maxQueueDepth: 64,
    maxBatch: 8,
    requestTimeoutMs: 300_000,
    queueWaitTimeoutMs: 60_000,
    jobLockMs: 10_000,
    heartbeatMs: 2_000,
    workerConcurrency: 4,
    dispatch: 'aware',
    handoff: 'direct',
    role: 'both',
    splitMinPrefillTokens: 256,
    stepTokens: 128,
    retainSequences: 16,
    fetchPolicy: 'auto',
    maxBodyBytes: 8 * 1024 * 1024,
    maxMessages: 10_000,
    maxJsonDepth: 64,
    logLevel: 'info',
    speculative: 'off',
    draftModel: null,
    encryption: null,
    gcIntervalMs: 3_600_000,
    unitIntervalTokens: 1024,
    unitCommonPrefixRequests: 2,
  };
}

/**
 * env, then flags, then `overrides` (tests). `storage` defaults to
 * `fs:<dataDir>/blocks` once the data dir is known.
 */
export function loadConfig(env: NodeJS.ProcessEnv = process.env, argv: readonly string[] = [], overrides: Partial<Config> = {}): Config {
  const config = defaultConfig();
  const set = (field: (typeof FIELDS)[number], raw: string, source: string): void => {
    (config as unknown as Record<string, unknown>)[field.key] = field.parse(raw, source);
  };
  for (const field of FIELDS) {
    const raw = env[field.env];
    if (raw !== undefined && raw !== '') set(field, raw, field.env);
  }
  const flags = parseFlags(argv);
  for (const [flag, raw] of flags) {
    const field = FIELDS.find((f) => flagNames(f.env).includes(flag));
    if (!field) {
      throw new KvtError('KVT_ERR_CONFIG_INVALID', `unknown flag --${flag}; known: ${FIELDS.map((f) => '--' + flagNames(f.env)[0]).join(' ')}`, { param: flag });
    }
    set(field, raw, `--${flag}`);
  }
  const redisSources = ['REDIS_URL', 'KVTIER_REDIS_CLUSTER'].filter((name) => (env[name] ?? '') !== '' || flags.some(([flag]) => flagNames(name).includes(flag)));
  if (redisSources.length > 1) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', 'set one of REDIS_URL (one Redis) or KVTIER_REDIS_CLUSTER (host:port,… of a Redis Cluster), not both', { param: 'KVTIER_REDIS_CLUSTER' });
  }
  const encryptionSources = ['KVTIER_ENCRYPTION_SECRET', 'KVTIER_ENCRYPTION_KEYRING'].filter((name) => (env[name] ?? '') !== '' || flags.some(([flag]) => flagNames(name).includes(flag)));
  if (encryptionSources.length > 1) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', 'set one of KVTIER_ENCRYPTION_SECRET (one key) or KVTIER_ENCRYPTION_KEYRING (a keyring file for rotation), not both', { param: 'KVTIER_ENCRYPTION_KEYRING' });
  }
  Object.assign(config, overrides);
  if (config.storage === '') config.storage = `fs:${resolve(config.dataDir, 'blocks')}`;
  if (config.speculative === 'draft' && !config.draftModel) {
    throw new KvtError('KVT_ERR_CONFIG_INVALID', 'KVTIER_SPECULATIVE=draft needs KVTIER_DRAFT_MODEL (a GGUF with the model\'s vocabulary); or use KVTIER_SPECULATIVE=ngram', { param: 'KVTIER_DRAFT_MODEL' });
  }
  return config;
}
