/**
 * Why a sealed block did not open, or why a keyring is unusable. On the load
 * path every one of these is a miss and a count in `stats().errors[code]`,
 * never an exception to the caller and never plaintext.
 */
export type SealErrorCode =
  /** The tag did not verify: tampered bytes, a blob moved under another key, or another tenant's key. */
  | 'KVT_ERR_SEAL_AUTH_FAILED'
  /** The blob was sealed under a key id this keyring does not hold (removed too early, or another cluster's). */
  | 'KVT_ERR_SEAL_UNKNOWN_KEY'
  /** The envelope header is cut short or names an unknown version/algorithm. */
  | 'KVT_ERR_SEAL_MALFORMED'
  /** A plaintext block was read while encryption is on (written before it was turned on, or planted). */
  | 'KVT_ERR_SEAL_NOT_SEALED'
  /** A sealed block was read by a node with encryption off. */
  | 'KVT_ERR_SEAL_NO_KEYRING'
  /** The keyring (KVTIER_ENCRYPTION_SECRET / KVTIER_ENCRYPTION_KEYRING) is unusable. */
  | 'KVT_ERR_SEAL_BAD_CONFIG';

/** Its own class (not a KvTierError subclass) so errors.ts's code union stays untouched; `errorCodeOf` counts it like any other. */
export class SealError extends Error {
  readonly code: SealErrorCode;
  constructor(code: SealErrorCode, message: string) {
    super(message);
    this.code = code;
    this.name = 'SealError';
  }
}
