import { StorageBadKeyError } from './errors.ts';

/**
 * Longest key any adapter accepts. The fs adapter appends a temp suffix of at
 * most 59 characters (`~host24.pid.tag8.counter`) to a key to form a file
 * name, and most filesystems cap a name at 255 bytes.
 */
export const MAX_KEY_LENGTH = 180;

const KEY_PATTERN = /^[0-9a-z._-]+$/;
const PREFIX_PATTERN = /^[0-9a-z._-]*$/;

/** Throws StorageBadKeyError unless `key` is in the contract's alphabet and not `.`/`..`. */
export function assertValidKey(key: string): void {
  if (typeof key !== 'string' || !KEY_PATTERN.test(key) || key.length > MAX_KEY_LENGTH || key === '.' || key === '..') {
    throw new StorageBadKeyError(
      String(key),
      `invalid blob key ${JSON.stringify(key)}: use 1–${MAX_KEY_LENGTH} characters of [0-9a-z._-], not "." or ".."`,
    );
  }
}

/** A list prefix follows the key alphabet; the empty prefix lists everything. */
export function assertValidPrefix(prefix: string): void {
  if (typeof prefix !== 'string' || !PREFIX_PATTERN.test(prefix) || prefix.length > MAX_KEY_LENGTH) {
    throw new StorageBadKeyError(
      String(prefix),
      `invalid list prefix ${JSON.stringify(prefix)}: use up to ${MAX_KEY_LENGTH} characters of [0-9a-z._-]`,
    );
  }
}
