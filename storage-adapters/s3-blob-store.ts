import { Agent as HttpAgent } from 'node:http';
import { Agent as HttpsAgent } from 'node:https';
import type { Readable } from 'node:stream';

import { createRequire } from 'node:module';

import type { S3Client } from '@aws-sdk/client-s3';

// The AWS SDK takes ~0.2 s to load; every process that imports storage-adapters
// (the CLI's admin commands included) would pay it, though only an s3:// store
// uses it. It is required on the first S3BlobStore instead (CommonJS, so the
// constructor stays synchronous).
const requireCjs = createRequire(import.meta.url);
let loadedSdk: typeof import('@aws-sdk/client-s3') | undefined;
function s3Sdk(): typeof import('@aws-sdk/client-s3') {
  return (loadedSdk ??= requireCjs('@aws-sdk/client-s3') as typeof import('@aws-sdk/client-s3'));
}

import type { BlobStore, GetOptions } from './blob-store.ts';
import { boundedMap } from './bounded-map.ts';
import {
  StorageBadConfigError,
  StorageClosedError,
  StorageError,
  StorageIoError,
} from './errors.ts';
import { assertValidKey, assertValidPrefix } from './keys.ts';
import { trackInFlight } from './in-flight.ts';
import { readBody } from './s3-body.ts';
import { isNotFound, resolveCredentials, s3StorageError } from './s3-faults.ts';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
  sessionToken?: string;
}

export interface S3BlobStoreOptions {
  /** `http://127.0.0.1:7480` (Ceph RGW), `http://minio:9000`; omit for AWS S3. */
  endpoint?: string;
  bucket: string;
  /** Key prefix inside the bucket; a trailing `/` is added when missing. Default: none. */
  prefix?: string;
  /** Default `us-east-1` (what RGW and MinIO accept). */
  region?: string;
  /** Explicit credentials; else AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY (/ AWS_SESSION_TOKEN), else the SDK's default chain. */
  credentials?: S3Credentials;
  /** Path-style URLs (`endpoint/bucket/key`). Default true when `endpoint` is set — RGW and MinIO need it. */
  forcePathStyle?: boolean;
  /** Create the bucket when it does not exist. Default false. */
  createBucket?: boolean;
  /** Most requests in flight for one has/delete/list call. Default 32. */
  concurrency?: number;
  /** Sockets kept alive per endpoint. Default 64. */
  maxSockets?: number;
  /** SDK attempts per request, retries included. Default 3. */
  maxAttempts?: number;
  /** TCP connect timeout. Default 3000 ms. */
  connectionTimeoutMs?: number;
  /** Whole-request timeout. Default 30000 ms. */
  requestTimeoutMs?: number;
  /** Where to read the AWS_* variables; default process.env. */
  env?: Record<string, string | undefined>;
}

/**
 * Blob store on any S3-compatible service (AWS S3, Ceph RGW, MinIO) through
 * `@aws-sdk/client-s3`.
 *
 * A block is one object `<prefix><key>`; S3 PUT replaces an object whole, so
 * readers see the old value or the new one, never a part. Requests go through
 * a keep-alive agent; `has` is parallel HeadObject (S3 has no batch HEAD),
 * `delete` is DeleteObjects in batches of 1000, `list` pages ListObjectsV2 —
 * each with at most `concurrency` requests in flight.
 *
 * Checksums are sent and checked only where the API requires them
 * (`requestChecksumCalculation: 'WHEN_REQUIRED'`): Ceph RGW rejects the
 * SDK's default trailing CRC32 on PutObject, and kvtier checksums every block
 * payload itself.
 */
export class S3BlobStore implements BlobStore {
  readonly kind = 's3';
  readonly location: string;
  readonly bucket: string;
  readonly keyPrefix: string;
  /** The underlying client, for callers that need an S3 call the contract lacks. */
  readonly client: S3Client;
  private readonly concurrency: number;
  private readonly agent: HttpAgent | HttpsAgent;
  private closed = false;
  private readonly inFlight = new Set<Promise<unknown>>();

  constructor(options: S3BlobStoreOptions) {
    const bucket = options?.bucket;
    if (typeof bucket !== 'string' || !/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
      throw new StorageBadConfigError('bucket', `S3 bucket name ${JSON.stringify(bucket)} is invalid: 3–63 characters of [a-z0-9.-]`);
    }
    const concurrency = options.concurrency ?? 32;
    if (!Number.isInteger(concurrency) || concurrency < 1) {
      throw new StorageBadConfigError('concurrency', `concurrency must be a positive integer, got ${concurrency}`);
    }
    let endpoint: URL | undefined;
    if (options.endpoint !== undefined) {
      try {
        endpoint = new URL(options.endpoint);
      } catch {
        throw new StorageBadConfigError('endpoint', `S3 endpoint ${JSON.stringify(options.endpoint)} is not a URL; use http://host:port`);
      }
      if (endpoint.protocol !== 'http:' && endpoint.protocol !== 'https:') {
        throw new StorageBadConfigError('endpoint', `S3 endpoint ${options.endpoint} must be http:// or https://`);
      }
    }
    const prefix = options.prefix ?? '';
    this.keyPrefix = prefix === '' || prefix.endsWith('/') ? prefix : `${prefix}/`;
    this.bucket = bucket;
    this.concurrency = concurrency;
    this.location = `s3://${bucket}/${this.keyPrefix}${endpoint ? ` at ${endpoint.origin}` : ''}`;
    const maxSockets = options.maxSockets ?? 64;
    this.agent = endpoint?.protocol === 'http:'
      ? new HttpAgent({ keepAlive: true, maxSockets })
      : new HttpsAgent({ keepAlive: true, maxSockets });
    this.client = new (s3Sdk().S3Client)({
      endpoint: endpoint?.toString(),
      region: options.region ?? 'us-east-1',
      credentials: resolveCredentials(options),
      forcePathStyle: options.forcePathStyle ?? endpoint !== undefined,
      maxAttempts: options.maxAttempts ?? 3,
      requestChecksumCalculation: 'WHEN_REQUIRED',
      responseChecksumValidation: 'WHEN_REQUIRED',
      requestHandler: {
        httpAgent: this.agent as HttpAgent,
        httpsAgent: this.agent as HttpsAgent,
        connectionTimeout: options.connectionTimeoutMs ?? 3000,
        requestTimeout: options.requestTimeoutMs ?? 30_000,
      },
    });
  }

  /** Like the constructor, then checks the bucket (creating it when `createBucket`), so a bad endpoint fails here. */
  static async open(options: S3BlobStoreOptions): Promise<S3BlobStore> {
    const store = new S3BlobStore(options);
    try {
      await store.ensureBucket(options.createBucket ?? false);
    } catch (error) {
      await store.close();
      throw error;
    }
    return store;
  }

  put(key: string, bytes: Uint8Array): Promise<void> {
    return this.track(async () => {
      const objectKey = this.objectKey(key);
      try {
        await this.client.send(
          new (s3Sdk().PutObjectCommand)({ Bucket: this.bucket, Key: objectKey, Body: bytes, ContentLength: bytes.byteLength }),
        );
      } catch (error) {
        throw this.toStorageError(error, 'put', objectKey);
      }
    });
  }

  get(key: string, options?: GetOptions): Promise<Uint8Array | null> {
    return this.track(async () => {
      const objectKey = this.objectKey(key);
      try {
        const response = await this.client.send(new (s3Sdk().GetObjectCommand)({ Bucket: this.bucket, Key: objectKey }));
        return await readBody(response.Body as Readable | undefined, response.ContentLength, options?.allocate, options?.maxBytes, `s3 object ${objectKey}`);
      } catch (error) {
        if (isNotFound(error)) return null;
        throw this.toStorageError(error, 'get', objectKey);
      }
    });
  }

  has(keys: readonly string[]): Promise<boolean[]> {
    return this.track(async () => {
      const objectKeys = keys.map((key) => this.objectKey(key));
      return boundedMap(objectKeys, this.concurrency, async (objectKey) => {
        try {
          await this.client.send(new (s3Sdk().HeadObjectCommand)({ Bucket: this.bucket, Key: objectKey }));
          return true;
        } catch (error) {
          if (isNotFound(error)) return false;
          throw this.toStorageError(error, 'has', objectKey);
        }
      });
    });
  }

  delete(keys: readonly string[]): Promise<void> {
    return this.track(async () => {
      const objectKeys = [...new Set(keys.map((key) => this.objectKey(key)))];
      const batches: string[][] = [];
      for (let i = 0; i < objectKeys.length; i += DELETE_BATCH) batches.push(objectKeys.slice(i, i + DELETE_BATCH));
      await boundedMap(batches, Math.max(1, Math.ceil(this.concurrency / 8)), async (batch) => {
        let response;
        try {
          response = await this.client.send(
            new (s3Sdk().DeleteObjectsCommand)({
              Bucket: this.bucket,
              Delete: { Objects: batch.map((Key) => ({ Key })), Quiet: true },
            }),
          );
        } catch (error) {
          throw this.toStorageError(error, 'delete', `${batch.length} keys from ${batch[0]}`);
        }
        // Quiet mode lists only failures; a key that did not exist is a success in S3.
        const failures = (response.Errors ?? []).filter((failure) => failure.Code !== 'NoSuchKey');
        if (failures.length > 0) {
          const sample = failures.slice(0, 3).map((f) => `${f.Key}: ${f.Code} ${f.Message ?? ''}`.trim());
          throw new StorageIoError(`s3 delete in ${this.location}: ${failures.length} of ${batch.length} keys failed (${sample.join('; ')})`);
        }
      });
    });
  }

  async *list(prefix = ''): AsyncIterable<string> {
    assertValidPrefix(prefix);
    let continuationToken: string | undefined;
    do {
      if (this.closed) throw new StorageClosedError(this.location);
      let page;
      try {
        page = await this.track(() =>
          this.client.send(
            new (s3Sdk().ListObjectsV2Command)({
              Bucket: this.bucket,
              Prefix: this.keyPrefix + prefix,
              ContinuationToken: continuationToken,
              MaxKeys: 1000,
            }),
          ),
        );
      } catch (error) {
        throw this.toStorageError(error, 'list', this.keyPrefix + prefix);
      }
      for (const object of page.Contents ?? []) {
        const key = object.Key?.slice(this.keyPrefix.length);
        // objects under deeper "folders" of our prefix are not ours
        if (key !== undefined && key.length > 0 && !key.includes('/')) yield key;
      }
      continuationToken = page.IsTruncated ? page.NextContinuationToken : undefined;
    } while (continuationToken !== undefined);
  }

  /** Waits for requests in flight, then releases the sockets. Idempotent. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await Promise.allSettled([...this.inFlight]);
    this.client.destroy();
    this.agent.destroy();
  }

  private async ensureBucket(create: boolean): Promise<void> {
    try {
      await this.client.send(new (s3Sdk().HeadBucketCommand)({ Bucket: this.bucket }));
      return;
    } catch (error) {
      if (!(create && isNotFound(error))) throw this.toStorageError(error, 'open', this.bucket);
    }
    try {
      await this.client.send(new (s3Sdk().CreateBucketCommand)({ Bucket: this.bucket }));
    } catch (error) {
      const name = (error as { name?: string }).name;
      // another node created it first
      if (name !== 'BucketAlreadyOwnedByYou' && name !== 'BucketAlreadyExists') {
        throw this.toStorageError(error, 'create bucket', this.bucket);
      }
    }
  }

  private objectKey(key: string): string {
    assertValidKey(key);
    return this.keyPrefix + key;
  }

  private track<T>(operation: () => Promise<T>): Promise<T> {
    if (this.closed) return Promise.reject(new StorageClosedError(this.location));
    return trackInFlight(this.inFlight, operation);
  }
  private toStorageError(error: unknown, operation: string, target: string): StorageError {
    return s3StorageError(error, `s3 ${operation} ${target} in ${this.location}`, operation, this.bucket);
  }
}

const DELETE_BATCH = 1000;
