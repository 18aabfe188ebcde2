/**
 * The driver contract every storage adapter implements. Adapters hold opaque
 * bytes under string keys; they know nothing of KV blocks.
 *
 * Keys are `[0-9a-z._-]` strings (kvtier uses 32 hex chars). `list(prefix)`
 * matches on the key string.
 */
export interface BlobStore {
  /** Adapter kind, e.g. `fs` or `s3`. */
  readonly kind: string;
  /** Human-readable location (directory, bucket/prefix) for logs. */
  readonly location: string;
  /**
   * Atomic: a concurrent reader sees the old value, the new one, or none — never a partial one. The adapter keeps no
   * reference to `bytes` once the promise resolved (the tier reuses the buffer then; never after a rejection: an
   * S3 request may still be reading it).
   */
  put(key: string, bytes: Uint8Array): Promise<void>;
  /**
   * The stored bytes, or null when the key does not exist. With
   * `options.allocate` an adapter that knows the size first reads into the
   * buffer it returns (a caller's recycled buffer: no fresh block-sized
   * allocation and page faults per read); adapters may ignore it. The
   * adapter keeps no reference to what it returns.
   */
  get(key: string, options?: GetOptions): Promise<Uint8Array | null>;
  /** Batched existence check, same order as `keys`. Must not be one sequential round trip per key. */
  has(keys: readonly string[]): Promise<boolean[]>;
  /** Deletes what exists; missing keys are not an error. */
  delete(keys: readonly string[]): Promise<void>;
  /** Every key starting with `prefix`, in no particular order. */
  list(prefix?: string): AsyncIterable<string>;
  close(): Promise<void>;
}

export interface GetOptions {
  /** A buffer of exactly `size` bytes for the blob (its ArrayBuffer may be larger). */
  allocate?: (size: number) => Uint8Array;
  /**
   * The largest blob the caller takes: a larger one is refused with
   * `StorageTooLargeError` before anything of its size is allocated (a sparse
   * file, a lying Content-Length, an endless body). Default: no limit.
   */
  maxBytes?: number;
  /**
   * Fills the buffer from the open file itself, in place of the store's own
   * reads: `fd` is open for reading, `bytes` (from `allocate`, after the
   * `maxBytes` check) is to hold the file from offset 0; the store still
   * opens, sizes and closes, and maps a rejection like its own read errors.
   * For a reader that works on each piece as it lands (seal/sealed-read.ts
   * decrypts it). The fs store honours it; a store without files (S3) reads
   * as usual and never calls it — the caller can tell by whether it ran.
   */
  fill?: (fd: number, bytes: Uint8Array) => Promise<void>;
}
