/**
 * Typed kvtier faults. Every class carries a stable `code`
 * (`KVT_ERR_<AREA>_<WHAT>`); match on `code`, not on the class or message.
 *
 * The facade never throws storage or block faults at its caller: they are
 * counted in `stats().errors[code]` and degrade to a miss. What does throw is
 * bad input from the caller (an unknown traffic class, a malformed layout,
 * a payload of the wrong size) — those are programming errors to fix.
 */
export type BlockErrorCode =
  | 'KVT_ERR_BLOCK_TRUNCATED'
  | 'KVT_ERR_BLOCK_BAD_MAGIC'
  | 'KVT_ERR_BLOCK_VERSION'
  | 'KVT_ERR_BLOCK_HEADER_CHECKSUM'
  | 'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM'
  | 'KVT_ERR_BLOCK_MALFORMED'
  | 'KVT_ERR_BLOCK_BAD_LAYOUT'
  | 'KVT_ERR_BLOCK_PAYLOAD_SIZE'
  | 'KVT_ERR_BLOCK_KEY_MISMATCH'
  | 'KVT_ERR_BLOCK_PARENT_MISMATCH'
  | 'KVT_ERR_BLOCK_TOKEN_MISMATCH'
  | 'KVT_ERR_BLOCK_FINGERPRINT_MISMATCH'
  | 'KVT_ERR_BLOCK_LAYOUT_MISMATCH'
  | 'KVT_ERR_BLOCK_MISSING'
  | 'KVT_ERR_BLOCK_TOO_LARGE';

export type KvTierErrorCode =
  | BlockErrorCode
  | 'KVT_ERR_HASH_BIG_ENDIAN'
  | 'KVT_ERR_HASH_BAD_INPUT'
  | 'KVT_ERR_HASH_INIT'
  | 'KVT_ERR_POLICY_INVALID'
  | 'KVT_ERR_POLICY_UNKNOWN_CLASS'
  | 'KVT_ERR_POLICY_CONFLICT'
  | 'KVT_ERR_POLICY_UNREACHABLE'
  | 'KVT_ERR_INDEX_OPEN'
  | 'KVT_ERR_INDEX_BAD_VALUE'
  | 'KVT_ERR_KVTIER_BAD_CONFIG'
  | 'KVT_ERR_KVTIER_BAD_REQUEST'
  | 'KVT_ERR_KVTIER_CLOSED'
  | 'KVT_ERR_PLANE_OPEN'
  | 'KVT_ERR_PLANE_UNREACHABLE'
  | 'KVT_ERR_PLANE_BAD_RECORD'
  | 'KVT_ERR_PLANE_CLOSED'
  | 'KVT_ERR_PLANE_SHARDS';

export class KvTierError extends Error {
  readonly code: KvTierErrorCode;
  constructor(code: KvTierErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A block file that fails decoding or verification. Never carries partial data. */
export class BlockError extends KvTierError {
  declare readonly code: BlockErrorCode;
  constructor(code: BlockErrorCode, message: string) {
    super(code, message);
  }
}

/** The cluster metadata plane cannot be opened or reached, or holds a record it cannot read. */
export class PlaneError extends KvTierError {}

/** Invalid retention policy, unknown class, or a concurrent edit that lost. */
export class PolicyError extends KvTierError {}

/** Bad options to `KvTier.open` or a bad argument to one of its methods. */
export class KvTierConfigError extends KvTierError {
  readonly field: string;
  constructor(field: string, message: string, code: KvTierErrorCode = 'KVT_ERR_KVTIER_BAD_CONFIG') {
    super(code, message);
    this.field = field;
  }
}

/** The stable `code` of any error, for counting: ours, the storage adapters', or a Node errno. */
export function errorCodeOf(error: unknown): string {
  if (typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string') {
    return error.code.startsWith('KVT_ERR_') ? error.code : `KVT_ERR_OTHER_${error.code}`;
  }
  return 'KVT_ERR_OTHER_UNKNOWN';
}
