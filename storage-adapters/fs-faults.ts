/** errno → the store's typed errors, with the operation, path and what to check. Split from fs-blob-store.ts by concern. */
import { StorageDeniedError, StorageError, StorageIoError, StorageUnreachableError } from './errors.ts';

export function errnoOf(error: unknown): string | undefined {
  return typeof error === 'object' && error !== null && 'code' in error && typeof error.code === 'string'
    ? error.code
    : undefined;
}

const DENIED = new Set(['EACCES', 'EPERM', 'EROFS']);
const UNREACHABLE = new Set(['ENOTCONN', 'EHOSTDOWN', 'EHOSTUNREACH', 'ETIMEDOUT', 'ENODEV', 'ESHUTDOWN', 'ECONNABORTED']);

/** errno → typed storage error with the operation, path and what to check. */
export function fsStorageError(error: unknown, operation: string, path: string): StorageError {
  if (error instanceof StorageError) return error;
  const errno = errnoOf(error) ?? 'unknown';
  if (DENIED.has(errno)) {
    return new StorageDeniedError(
      `fs ${operation} ${path}: ${errno} — the directory is not writable by this process (uid ${process.getuid?.()}) or the mount is read-only`,
      { cause: error },
    );
  }
  if (UNREACHABLE.has(errno)) {
    return new StorageUnreachableError(`fs ${operation} ${path}: ${errno} — the shared mount is gone or not responding; check the FUSE/NFS mount`, {
      cause: error,
    });
  }
  if (errno === 'ENOSPC' || errno === 'EDQUOT') {
    return new StorageIoError(`fs ${operation} ${path}: ${errno} — the filesystem or quota is full; run GC or lower the capacity quota`, {
      cause: error,
    });
  }
  if (errno === 'ESHORTREAD') {
    return new StorageIoError(`fs ${operation} ${path}: ${(error as Error).message}`, { cause: error });
  }
  if (errno === 'ENOTDIR') {
    return new StorageIoError(`fs ${operation} ${path}: ENOTDIR — a component of the store path is a file; the store directory is damaged or misconfigured`, {
      cause: error,
    });
  }
  const detail = error instanceof Error ? error.message : String(error);
  return new StorageIoError(`fs ${operation} ${path}: ${detail}`, { cause: error });
}
