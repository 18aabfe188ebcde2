/**
 * Typed storage faults. Every adapter turns the failures of its backend into
 * one of these, so the kvtier layer can degrade any of them to a cache miss
 * (a slower answer, never a wrong one). A key that does not exist is not a
 * fault: `get` answers `null` and `has` answers `false`.
 *
 * Codes are stable strings `KVT_ERR_STORAGE_<WHAT>`; match on `code`, not on
 * the class or the message.
 */
export type StorageErrorCode =
  | 'KVT_ERR_STORAGE_UNREACHABLE'
  | 'KVT_ERR_STORAGE_BAD_URL'
  | 'KVT_ERR_STORAGE_BAD_CONFIG'
  | 'KVT_ERR_STORAGE_BAD_KEY'
  | 'KVT_ERR_STORAGE_DENIED'
  | 'KVT_ERR_STORAGE_NO_BUCKET'
  | 'KVT_ERR_STORAGE_IO'
  | 'KVT_ERR_STORAGE_TOO_LARGE'
  | 'KVT_ERR_STORAGE_CLOSED';

export class StorageError extends Error {
  readonly code: StorageErrorCode;
  constructor(code: StorageErrorCode, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.code = code;
    this.name = new.target.name;
  }
}

/** A fault that carries its code, message and cause, and nothing else. */
function faultClass(code: StorageErrorCode) {
  return class extends StorageError {
    constructor(message: string, options?: { cause?: unknown }) {
      super(code, message, options);
    }
  };
}

/** A fault in the store's own settings; `field` names the part that is wrong. */
function settingFaultClass(code: StorageErrorCode) {
  return class extends StorageError {
    readonly field: string;
    constructor(field: string, message: string) {
      super(code, message);
      this.field = field;
    }
  };
}

/** The backend could not be reached at all (connection refused, DNS, timeout, mount gone). */
export class StorageUnreachableError extends faultClass('KVT_ERR_STORAGE_UNREACHABLE') {}

/** A storage URL that cannot be parsed; `field` names the part that is wrong. */
export class StorageBadUrlError extends settingFaultClass('KVT_ERR_STORAGE_BAD_URL') {}

/** An adapter option that is missing or out of range; `field` names it. */
export class StorageBadConfigError extends settingFaultClass('KVT_ERR_STORAGE_BAD_CONFIG') {}

/** A key outside the contract's alphabet `[0-9a-z._-]` or too long. */
export class StorageBadKeyError extends StorageError {
  readonly key: string;
  constructor(key: string, message: string) {
    super('KVT_ERR_STORAGE_BAD_KEY', message);
    this.key = key;
  }
}

/** The backend refused us: a read-only directory, wrong credentials, a forbidden bucket. */
export class StorageDeniedError extends faultClass('KVT_ERR_STORAGE_DENIED') {}

/** The S3 bucket does not exist (and the store was not asked to create it). */
export class StorageNoBucketError extends StorageError {
  readonly bucket: string;
  constructor(bucket: string, message: string, options?: { cause?: unknown }) {
    super('KVT_ERR_STORAGE_NO_BUCKET', message, options);
    this.bucket = bucket;
  }
}

/** Any other failure of a read, write, list or delete (disk full, EIO, a 5xx answer). */
export class StorageIoError extends faultClass('KVT_ERR_STORAGE_IO') {}

/**
 * A stored blob (a file's size, an object's Content-Length or body) larger than
 * the reader's `maxBytes`: refused before a buffer of that size is allocated.
 */
export class StorageTooLargeError extends StorageError {
  readonly sizeBytes: number;
  readonly maxBytes: number;
  constructor(location: string, sizeBytes: number, maxBytes: number) {
    super('KVT_ERR_STORAGE_TOO_LARGE', `${location} is ${sizeBytes} bytes, more than the ${maxBytes} the reader accepts; a foreign or corrupt blob (delete it) or a reader whose limit is too low`);
    this.sizeBytes = sizeBytes;
    this.maxBytes = maxBytes;
  }
}

/** The store was used after `close()`. */
export class StorageClosedError extends StorageError {
  constructor(location: string) {
    super('KVT_ERR_STORAGE_CLOSED', `blob store ${location} is closed; open a new one with openBlobStore()`);
  }
}

export function isStorageError(value: unknown): value is StorageError {
  return value instanceof StorageError;
}
