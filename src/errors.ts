/**
 * The one registry of kvtier error codes. Every error that reaches a client or
 * the CLI carries a stable `code` (`KVT_ERR_<AREA>_<WHAT>`); this table says
 * which HTTP status it maps to, which OpenAI/Anthropic error `type` it shows
 * as, and a hint what to do about it.
 *
 * Lower layers (storage-adapters, src/kvtier, inference-core, native) throw
 * their own typed errors with a `code`; `describeError` maps them here by code
 * (exact entry first, then the area prefix), so the serve layer never needs to
 * import their classes.
 */

export type ErrorType =
  | 'invalid_request_error'
  | 'authentication_error'
  | 'permission_error'
  | 'not_found_error'
  | 'rate_limit_error'
  | 'overloaded_error'
  | 'api_error'
  | 'timeout_error'
  | 'conflict_error';

export interface ErrorSpec {
  status: number;
  type: ErrorType;
  hint: string;
  /** Seconds a client should wait before retrying (Retry-After), where retrying helps. */
  retryAfterS?: number;
}

export const ERROR_REGISTRY = {
  // --- requests -------------------------------------------------------------
  KVT_ERR_REQUEST_BAD_JSON: { status: 400, type: 'invalid_request_error', hint: 'send a valid JSON body with content-type: application/json' },
  KVT_ERR_REQUEST_INVALID: { status: 400, type: 'invalid_request_error', hint: 'fix the named field; see the API reference of the route' },
  KVT_ERR_REQUEST_TOO_LARGE: { status: 413, type: 'invalid_request_error', hint: 'send a smaller body (the server\'s limit is KVTIER_MAX_BODY_BYTES)' },
  KVT_ERR_REQUEST_HEADERS_TOO_LARGE: { status: 431, type: 'invalid_request_error', hint: 'send smaller headers (cookies, long custom headers): the server\'s limit is Node\'s --max-http-header-size, 16 KiB by default' },
  KVT_ERR_REQUEST_TIMEOUT: { status: 408, type: 'invalid_request_error', hint: 'send the whole request promptly; the connection was closed after the server\'s request timeout' },
  KVT_ERR_REQUEST_MALFORMED: { status: 400, type: 'invalid_request_error', hint: 'send a valid HTTP/1.1 request (request line, headers, Content-Length or chunked body)' },
  KVT_ERR_REQUEST_TOO_MANY_MESSAGES: { status: 400, type: 'invalid_request_error', hint: 'send fewer messages (the server\'s limit is KVTIER_MAX_MESSAGES): drop or summarise early turns' },
  KVT_ERR_REQUEST_TOO_DEEP: { status: 400, type: 'invalid_request_error', hint: 'flatten the named field: JSON nested deeper than KVTIER_MAX_JSON_DEPTH is refused' },
  KVT_ERR_REQUEST_UNSUPPORTED_MEDIA: { status: 415, type: 'invalid_request_error', hint: 'send content-type: application/json' },
  KVT_ERR_REQUEST_UNKNOWN_MODEL: { status: 404, type: 'not_found_error', hint: 'GET /v1/models lists the served models' },
  KVT_ERR_REQUEST_UNKNOWN_CLASS: { status: 400, type: 'invalid_request_error', hint: 'use one of the traffic classes of GET /admin/policy (agent, chat, …)' },
  KVT_ERR_REQUEST_CONTEXT_OVERFLOW: { status: 400, type: 'invalid_request_error', hint: 'shorten the prompt or lower max_tokens so prompt + max_tokens fits the context length' },
  KVT_ERR_REQUEST_MAX_TOKENS: { status: 400, type: 'invalid_request_error', hint: 'lower max_tokens to at most the model context length minus the prompt' },
  KVT_ERR_REQUEST_EMPTY_PROMPT: { status: 400, type: 'invalid_request_error', hint: 'send at least one message or a non-empty prompt' },
  KVT_ERR_RESPONSE_TOO_LARGE: { status: 400, type: 'invalid_request_error', hint: 'the stored conversation would pass the server\'s bound on one stored response (KVTIER_RESPONSE_MEMORY_BYTES): start a new conversation (send the history you need as input, without previous_response_id) or send store: false' },
  KVT_ERR_RESPONSE_NOT_FOUND: { status: 404, type: 'not_found_error', hint: 'the stored response does not exist, expired with its traffic class, was deleted, or belongs to another tenant; send the full input instead' },
  KVT_ERR_ROUTE_NOT_FOUND: { status: 404, type: 'not_found_error', hint: 'see the route list: /v1/chat/completions, /v1/completions, /v1/messages, /v1/responses, /v1/models' },
  KVT_ERR_ROUTE_METHOD: { status: 405, type: 'invalid_request_error', hint: 'use the method the route expects' },
  // --- auth -------------------------------------------------------------------
  KVT_ERR_AUTH_MISSING_KEY: { status: 401, type: 'authentication_error', hint: 'send Authorization: Bearer <key> (or x-api-key: <key>)' },
  KVT_ERR_AUTH_BAD_KEY: { status: 401, type: 'authentication_error', hint: 'use a key listed in the KVTIER_API_KEYS file' },
  KVT_ERR_AUTH_ADMIN_DISABLED: { status: 403, type: 'permission_error', hint: 'start the server with KVTIER_ADMIN_TOKEN set to use /admin/*' },
  KVT_ERR_AUTH_ADMIN_TOKEN: { status: 401, type: 'authentication_error', hint: 'send Authorization: Bearer <KVTIER_ADMIN_TOKEN>' },
  // --- queue / workers --------------------------------------------------------
  KVT_ERR_QUEUE_FULL: { status: 429, type: 'rate_limit_error', hint: 'too many requests are waiting; retry after the Retry-After seconds', retryAfterS: 1 },
  KVT_ERR_QUEUE_UNAVAILABLE: { status: 503, type: 'overloaded_error', hint: 'the job queue (Redis) is unreachable; the server retries by itself, retry the request later', retryAfterS: 2 },
  KVT_ERR_QUEUE_NO_WORKERS: { status: 503, type: 'overloaded_error', hint: 'no `kvtier worker` took the job in time; start workers that see the same REDIS_URL', retryAfterS: 5 },
  KVT_ERR_WORKER_LOST: { status: 503, type: 'overloaded_error', hint: 'the worker running the request died; retry the request', retryAfterS: 1 },
  KVT_ERR_WORKER_TIMEOUT: { status: 504, type: 'timeout_error', hint: 'the request ran past the request timeout; retry, or raise the timeout', retryAfterS: 1 },
  KVT_ERR_WORKER_FAILED: { status: 500, type: 'api_error', hint: 'the worker failed on this request; see the server log for the cause' },
  KVT_ERR_SERVER_SHUTTING_DOWN: { status: 503, type: 'overloaded_error', hint: 'the server is stopping; retry on another instance', retryAfterS: 1 },
  KVT_ERR_SERVER_NOT_READY: { status: 503, type: 'overloaded_error', hint: 'the model is still loading; retry shortly', retryAfterS: 2 },
  // --- config -----------------------------------------------------------------
  KVT_ERR_CONFIG_INVALID: { status: 500, type: 'api_error', hint: 'fix the named environment variable or flag (see kvtier --help)' },
  KVT_ERR_CONFIG_API_KEYS: { status: 500, type: 'api_error', hint: 'KVTIER_API_KEYS must name a JSON file {"key": "tenant"|{tenant,shared}} or lines "key tenant [shared]"' },
  KVT_ERR_CONFIG_BLOCK_TOKENS: { status: 500, type: 'api_error', hint: 'set KVTIER_BLOCK_TOKENS to the engine\'s KV page size (tokens per page), or leave it unset' },
  // --- admin ------------------------------------------------------------------
  KVT_ERR_ADMIN_POLICY: { status: 400, type: 'invalid_request_error', hint: 'send a policy with ttl per class in seconds and an optional byte quota' },
  KVT_ERR_ADMIN_BAD_REQUEST: { status: 400, type: 'invalid_request_error', hint: 'fix the named field; see kvtier --help' },
  KVT_ERR_ADMIN_NOT_FOUND: { status: 404, type: 'not_found_error', hint: 'kvtier ls lists the blocks this node knows' },
  KVT_ERR_ADMIN_UNAVAILABLE: { status: 503, type: 'overloaded_error', hint: 'the cache tier is not open on this server; see its log' },
  // --- structured output (inference-core/grammar) -----------------------------
  KVT_ERR_GRAMMAR_UNSUPPORTED_KEYWORD: { status: 400, type: 'invalid_request_error', hint: 'remove the named JSON Schema keyword or use one the grammar compiler supports (see README: structured output)' },
  KVT_ERR_GRAMMAR_INVALID_SCHEMA: { status: 400, type: 'invalid_request_error', hint: 'send a valid JSON Schema at the named path' },
  KVT_ERR_GRAMMAR_UNSATISFIABLE: { status: 400, type: 'invalid_request_error', hint: 'the schema admits no value (conflicting bounds, empty enum); relax it' },
  KVT_ERR_GRAMMAR_BUDGET: { status: 400, type: 'invalid_request_error', hint: 'raise max_tokens: the shortest reply the schema allows does not fit' },
  KVT_ERR_GRAMMAR_DEAD_END: { status: 500, type: 'api_error', hint: 'the model vocabulary cannot spell what the schema needs; report the schema and model' },
  // --- the cache tier's own contract (caller faults inside the server) --------
  KVT_ERR_KVTIER_CLOSED: { status: 503, type: 'overloaded_error', hint: 'the cache tier is closing with the server; retry on another instance', retryAfterS: 1 },
  // --- fallback ---------------------------------------------------------------
  KVT_ERR_INTERNAL: { status: 500, type: 'api_error', hint: 'an unexpected fault; see the server log' },
} as const satisfies Record<string, ErrorSpec>;

export type KvtErrorCode = keyof typeof ERROR_REGISTRY;

/**
 * Lower layers' codes, by area prefix. A storage fault is normally degraded to a
 * cache miss before it gets here; when one does surface it is a 503 (transient).
 */
const AREA_SPECS: Array<[prefix: string, spec: ErrorSpec]> = [
  ['KVT_ERR_CLUSTER_GC_BUSY', { status: 409, type: 'conflict_error', hint: 'another node is collecting now; retry when it finishes', retryAfterS: 5 }],
  ['KVT_ERR_CLUSTER_BAD_', { status: 500, type: 'api_error', hint: 'fix the cluster option named in the message (REDIS_URL, lease settings)' }],
  ['KVT_ERR_CLUSTER_', { status: 503, type: 'overloaded_error', hint: 'cluster coordination through Redis failed; retry, and check REDIS_URL', retryAfterS: 2 }],
  ['KVT_ERR_SEAL_BAD_CONFIG', { status: 500, type: 'api_error', hint: 'fix KVTIER_ENCRYPTION_KEYRING / KVTIER_ENCRYPTION_SECRET (see README: encryption at rest)' }],
  ['KVT_ERR_SEAL_', { status: 500, type: 'api_error', hint: 'a stored block did not open (wrong key, tampered or foreign blob); it was served as a miss — check the keyring on every node' }],
  ['KVT_ERR_CODEC_UNKNOWN', { status: 400, type: 'invalid_request_error', hint: 'use a block codec the policy knows: none, int8, fp8, int4' }],
  ['KVT_ERR_CODEC_', { status: 500, type: 'api_error', hint: 'measuring or applying a block codec failed; see the server log, or set the codec with force' }],
  ['KVT_ERR_REPLAY_SERVER', { status: 502, type: 'api_error', hint: 'check --url (a running kvtier server\'s base URL), --api-key and the server\'s log' }],
  ['KVT_ERR_REPLAY_', { status: 400, type: 'invalid_request_error', hint: 'fix the trace line named in the message (Mooncake JSONL or the generic form: src/replay/README.md)' }],
  ['KVT_ERR_CLI_', { status: 400, type: 'invalid_request_error', hint: 'see kvtier --help for the command\'s flags' }],
  ['KVT_ERR_KVTIER_', { status: 500, type: 'api_error', hint: 'the server called the cache tier wrongly (a bug): see the server log and report it' }],
  ['KVT_ERR_HASH_', { status: 500, type: 'api_error', hint: 'prefix hashing failed: see the server log (WebAssembly and a little-endian CPU are required)' }],
  ['KVT_ERR_FINGERPRINT_', { status: 500, type: 'api_error', hint: 'the model cannot be fingerprinted for the cache; check the model file and KVTIER_KV_DTYPE' }],
  ['KVT_ERR_SYNTHETIC_', { status: 500, type: 'api_error', hint: 'fix the synthetic model name (synthetic:<tiny|small|1b|deepseek-…>[:type])' }],
  ['KVT_ERR_OTHER_', { status: 500, type: 'api_error', hint: 'a lower layer failed with a foreign error code; see the server log' }],
  ['KVT_ERR_STORAGE_BAD_', { status: 500, type: 'api_error', hint: 'fix KVTIER_STORAGE (fs:<dir>, segment:<dir> or s3://bucket/prefix?endpoint=…)' }],
  ['KVT_ERR_STORAGE_', { status: 503, type: 'overloaded_error', hint: 'the block store failed; requests fall back to full prefill, check the storage backend', retryAfterS: 1 }],
  ['KVT_ERR_BLOCK_', { status: 500, type: 'api_error', hint: 'a cached block failed verification and was treated as a miss; check the storage for corruption' }],
  ['KVT_ERR_PLANE_', { status: 503, type: 'overloaded_error', hint: 'the cluster metadata plane (Redis at REDIS_URL, or <dataDir>/plane) failed; retry, and check it is reachable', retryAfterS: 2 }],
  ['KVT_ERR_INDEX_', { status: 500, type: 'api_error', hint: 'the local block index failed; check KVTIER_DATA_DIR (disk space, permissions)' }],
  ['KVT_ERR_POLICY_', { status: 400, type: 'invalid_request_error', hint: 'send a valid retention policy (ttl per class in seconds, byte quota)' }],
  ['KVT_ERR_GGUF_', { status: 500, type: 'api_error', hint: 'the model file is not a valid GGUF model; check --model / KVTIER_MODEL' }],
  ['KVT_ERR_TOKENIZER_', { status: 500, type: 'api_error', hint: 'the model tokenizer failed; check the GGUF tokenizer metadata' }],
  ['KVT_ERR_TEMPLATE_', { status: 400, type: 'invalid_request_error', hint: 'the chat template could not render these messages; check roles and content' }],
  ['KVT_ERR_ENGINE_SAMPLING', { status: 400, type: 'invalid_request_error', hint: 'fix the sampling fields (temperature ≥ 0, top_p in (0, 1], top_k ≥ 0, integer seed)' }],
  ['KVT_ERR_ENGINE_BAD_TOKEN', { status: 400, type: 'invalid_request_error', hint: 'token ids must be in [0, vocab size)' }],
  ['KVT_ERR_ENGINE_CONTEXT', { status: 400, type: 'invalid_request_error', hint: 'shorten the prompt or lower max_tokens so they fit the context length' }],
  ['KVT_ERR_ENGINE_POOL', { status: 503, type: 'overloaded_error', hint: 'the KV pool is full; retry shortly', retryAfterS: 1 }],
  ['KVT_ERR_ENGINE_', { status: 500, type: 'api_error', hint: 'the inference engine failed; see the server log' }],
  ['KVT_ERR_NATIVE_', { status: 500, type: 'api_error', hint: 'the native core failed; rebuild it with npm install' }],
  ['KVT_ERR_CUDA_', { status: 500, type: 'api_error', hint: 'the CUDA backend failed; unset KVTIER_DEVICE to run on the CPU' }],
];

export function specFor(code: string): ErrorSpec {
  const exact = (ERROR_REGISTRY as Record<string, ErrorSpec>)[code];
  if (exact) return exact;
  for (const [prefix, spec] of AREA_SPECS) if (code.startsWith(prefix)) return spec;
  return ERROR_REGISTRY.KVT_ERR_INTERNAL;
}

/** The error class of the serve/recipe/workers layers. */
export class KvtError extends Error {
  readonly code: string;
  readonly status: number;
  /** The request field at fault (OpenAI's `param`), when there is one. */
  readonly param: string | null;
  readonly retryAfterS: number | undefined;
  constructor(code: KvtErrorCode | string, message: string, options: { param?: string | null; cause?: unknown; retryAfterS?: number } = {}) {
    super(message, options.cause === undefined ? undefined : { cause: options.cause });
    this.name = 'KvtError';
    this.code = code;
    const spec = specFor(code);
    this.status = spec.status;
    this.param = options.param ?? null;
    this.retryAfterS = options.retryAfterS ?? spec.retryAfterS;
  }
}

export interface DescribedError {
  status: number;
  code: string;
  type: ErrorType;
  message: string;
  param: string | null;
  hint: string;
  retryAfterS?: number;
}

/**
 * Any thrown value → what the client is told. Errors with a `code` of ours keep
 * it; everything else is KVT_ERR_INTERNAL (the message is kept, the stack is
 * only logged).
 */
export function describeError(error: unknown): DescribedError {
  const anyError = error as { code?: unknown; message?: unknown; param?: unknown; retryAfterS?: unknown; field?: unknown } | null;
  const rawCode = typeof anyError?.code === 'string' && anyError.code.startsWith('KVT_ERR_') ? anyError.code : 'KVT_ERR_INTERNAL';
  const spec = specFor(rawCode);
  const message = typeof anyError?.message === 'string' && anyError.message !== '' ? anyError.message : String(error);
  const param = typeof anyError?.param === 'string' ? anyError.param : typeof anyError?.field === 'string' ? anyError.field : null;
  const retryAfterS = typeof anyError?.retryAfterS === 'number' ? anyError.retryAfterS : spec.retryAfterS;
  return { status: spec.status, code: rawCode, type: spec.type, message, param, hint: spec.hint, retryAfterS };
}

/** `KvtError` or a lower layer's typed error with a `KVT_ERR_` code. */
export function isKvtCoded(error: unknown): error is { code: string; message: string } {
  const code = (error as { code?: unknown } | null)?.code;
  return typeof code === 'string' && code.startsWith('KVT_ERR_');
}
