/**
 * How the S3 store reads a failure of the SDK (or of the socket under it) and
 * where its credentials come from. Split from s3-blob-store.ts by concern.
 */
import { StorageBadConfigError, StorageDeniedError, StorageError, StorageIoError, StorageNoBucketError, StorageUnreachableError } from './errors.ts';
import type { S3BlobStoreOptions, S3Credentials } from './s3-blob-store.ts';

/** Any failure of an S3 call → the store's typed error, by errno, SDK error name or HTTP status (`where` names the call). */
export function s3StorageError(error: unknown, where: string, operation: string, bucket: string): StorageError {
  if (error instanceof StorageError) return error;
  const { name, status, errno, message } = s3FaultOf(error);
  if ((errno !== undefined && UNREACHABLE_ERRNO.has(errno)) || UNREACHABLE_NAMES.has(name)) {
    return new StorageUnreachableError(`${where}: ${errno ?? name} — the S3 endpoint cannot be reached; check endpoint, network and that the service is up`, {
      cause: error,
    });
  }
  if (name === 'NoSuchBucket' || (operation === 'open' && status === 404)) {
    return new StorageNoBucketError(bucket, `${where}: bucket "${bucket}" does not exist; create it or open with createBucket: true (URL: ?createBucket=true)`, {
      cause: error,
    });
  }
  if (status === 403 || DENIED_NAMES.has(name)) {
    return new StorageDeniedError(`${where}: ${name} (HTTP ${status ?? '?'}) — check the access key, secret and bucket policy`, { cause: error });
  }
  return new StorageIoError(`${where}: ${name}${status ? ` (HTTP ${status})` : ''}: ${message}`, { cause: error });
}

const UNREACHABLE_ERRNO = new Set(['ECONNREFUSED', 'ECONNRESET', 'ENOTFOUND', 'EAI_AGAIN', 'ETIMEDOUT', 'EHOSTUNREACH', 'ENETUNREACH', 'EPIPE', 'ECONNABORTED']);
const UNREACHABLE_NAMES = new Set(['TimeoutError', 'RequestTimeout', 'NetworkingError']);
const DENIED_NAMES = new Set(['AccessDenied', 'InvalidAccessKeyId', 'SignatureDoesNotMatch', 'Forbidden', 'ExpiredToken']);

export function resolveCredentials(options: S3BlobStoreOptions): S3Credentials | undefined {
  if (options.credentials) {
    const { accessKeyId, secretAccessKey } = options.credentials;
    if (!accessKeyId || !secretAccessKey) {
      throw new StorageBadConfigError('credentials', 'S3 credentials need both accessKeyId and secretAccessKey');
    }
    return options.credentials;
  }
  const env = options.env ?? process.env;
  if (env.AWS_ACCESS_KEY_ID && env.AWS_SECRET_ACCESS_KEY) {
    return {
      accessKeyId: env.AWS_ACCESS_KEY_ID,
      secretAccessKey: env.AWS_SECRET_ACCESS_KEY,
      ...(env.AWS_SESSION_TOKEN ? { sessionToken: env.AWS_SESSION_TOKEN } : {}),
    };
  }
  return undefined; // the SDK's default chain: shared config files, SSO, instance roles
}

export function isNotFound(error: unknown): boolean {
  const { name, status } = s3FaultOf(error);
  return name === 'NoSuchKey' || name === 'NotFound' || (status === 404 && name !== 'NoSuchBucket');
}

/** The parts of an AWS SDK (or socket) error the S3 store classifies by; not src/errors.ts's describeError, which says what a client is told. */
function s3FaultOf(error: unknown): { name: string; status?: number; errno?: string; message: string } {
  const e = error as { name?: string; code?: string; message?: string; $metadata?: { httpStatusCode?: number }; cause?: { code?: string } };
  const errno = e?.code ?? e?.cause?.code;
  return {
    name: e?.name ?? 'Error',
    status: e?.$metadata?.httpStatusCode,
    errno: typeof errno === 'string' ? errno : undefined,
    message: e?.message ?? String(error),
  };
}

