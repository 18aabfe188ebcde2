import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { BlobStore } from './blob-store.ts';
import { StorageBadUrlError } from './errors.ts';
import { FsBlobStore, type FsBlobStoreOptions } from './fs-blob-store.ts';
import { S3BlobStore, type S3BlobStoreOptions } from './s3-blob-store.ts';
import { SegmentBlobStore, type SegmentBlobStoreOptions } from './segment-blob-store.ts';

export interface OpenBlobStoreOptions {
  /** Defaults for the fs adapter; options in the URL win. */
  fs?: Partial<Omit<FsBlobStoreOptions, 'dir'>>;
  /** Defaults for the s3 adapter (timeouts, retries, credentials); options in the URL win. */
  s3?: Partial<S3BlobStoreOptions>;
  /** Defaults for the segment adapter; options in the URL win. */
  segment?: Partial<Omit<SegmentBlobStoreOptions, 'dir'>>;
}

/**
 * Opens a store from a `KVTIER_STORAGE`-style string:
 *
 * - `fs:<dir>[?fsync=true&concurrency=64]`, `file:///abs/dir`, or a plain path
 *   (`./data/blocks`, `/mnt/3fs/kv`; taken literally, no options).
 * - `segment:<dir>[?fsync=true&segmentBytes=67108864]`: values packed into
 *   append-only segment files (segment-blob-store.ts).
 * - `s3://bucket[/prefix][?endpoint=http://127.0.0.1:7480&region=us-east-1
 *   &forcePathStyle=true&createBucket=true&concurrency=32
 *   &accessKeyId=…&secretAccessKey=…]` — credentials default to
 *   AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY.
 *
 * Anything else is a StorageBadUrlError whose `field` names the wrong part.
 */
export async function openBlobStore(url: string, options: OpenBlobStoreOptions = {}): Promise<BlobStore> {
  const spec = parseBlobStoreUrl(url);
  if (spec.kind === 's3') return S3BlobStore.open({ ...options.s3, ...spec.options });
  if (spec.kind === 'segment') return SegmentBlobStore.open({ ...options.segment, ...spec.options });
  return FsBlobStore.open({ ...options.fs, ...spec.options });
}

export type BlobStoreSpec =
  | { kind: 'fs'; options: FsBlobStoreOptions }
  | { kind: 's3'; options: S3BlobStoreOptions }
  | { kind: 'segment'; options: SegmentBlobStoreOptions };

/** Parses without touching the backend (for config validation and `kvtier config check`). */
export function parseBlobStoreUrl(url: string): BlobStoreSpec {
  if (typeof url !== 'string' || url.trim() === '') {
    throw new StorageBadUrlError('url', 'storage URL is empty: use fs:<dir> or s3://bucket/prefix?endpoint=…');
  }
  const scheme = /^([a-z][a-z0-9+.-]*):/i.exec(url)?.[1]?.toLowerCase();
  if (scheme === undefined || scheme.length === 1 /* a Windows drive letter */) {
    return { kind: 'fs', options: { dir: resolve(url) } };
  }
  if (scheme === 'fs') return parseFsUrl(url);
  if (scheme === 's3') return parseS3Url(url);
  if (scheme === 'segment') return parseSegmentUrl(url);
  if (scheme === 'file') {
    try {
      return { kind: 'fs', options: { dir: fileURLToPath(url) } };
    } catch (error) {
      throw new StorageBadUrlError('path', `cannot read a path from ${url}: ${(error as Error).message}; use file:///absolute/dir`);
    }
  }
  throw new StorageBadUrlError('scheme', `unknown storage scheme "${scheme}:" in ${redact(url)}; use fs:<dir>, segment:<dir> or s3://bucket/prefix?endpoint=…`);
}

/** `<scheme>:<dir>[?name=value…]` (fs and segment): the directory, absolute, and the query's options. */
function splitDirUrl(url: string, scheme: 'fs' | 'segment'): { dir: string; params: URLSearchParams } {
  const body = url.slice(scheme.length + 1).replace(/^\/\/(?=\/)/, ''); // fs:///abs → /abs
  const queryAt = body.indexOf('?');
  const path = queryAt === -1 ? body : body.slice(0, queryAt);
  if (path === '') throw new StorageBadUrlError('path', `${url} names no directory; use ${scheme}:/mnt/3fs/kv or ${scheme}:./data/${scheme === 'fs' ? 'blocks' : 'segments'}`);
  return { dir: isAbsolute(path) ? path : resolve(path), params: new URLSearchParams(queryAt === -1 ? '' : body.slice(queryAt + 1)) };
}

function parseFsUrl(url: string): BlobStoreSpec {
  const { dir, params } = splitDirUrl(url, 'fs');
  const options: FsBlobStoreOptions = { dir };
  for (const [name, value] of params) {
    if (name === 'fsync') options.fsync = parseBoolean(name, value);
    else if (name === 'concurrency') options.concurrency = parsePositiveInt(name, value);
    else throw new StorageBadUrlError(name, `unknown fs option "${name}" in ${url}; known: fsync, concurrency`);
  }
  return { kind: 'fs', options };
}

function parseSegmentUrl(url: string): BlobStoreSpec {
  const { dir, params } = splitDirUrl(url, 'segment');
  const options: SegmentBlobStoreOptions = { dir };
  for (const [name, value] of params) {
    if (name === 'fsync') options.fsync = parseBoolean(name, value);
    else if (name === 'segmentBytes') options.segmentBytes = parsePositiveInt(name, value);
    else throw new StorageBadUrlError(name, `unknown segment option "${name}" in ${url}; known: fsync, segmentBytes`);
  }
  return { kind: 'segment', options };
}

function parseS3Url(url: string): BlobStoreSpec {
  let parsed: URL;
  try {
    parsed = new URL(url);
  } catch {
    throw new StorageBadUrlError('url', `cannot parse ${redact(url)}; use s3://bucket/prefix?endpoint=http://host:port`);
  }
  const bucket = parsed.hostname;
  if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(bucket)) {
    throw new StorageBadUrlError('bucket', `bucket "${bucket}" in ${redact(url)} is not a valid S3 bucket name (3–63 of [a-z0-9.-])`);
  }
  if (parsed.port !== '' || parsed.username !== '' || parsed.password !== '') {
    throw new StorageBadUrlError('bucket', `${redact(url)}: s3://<bucket>/… takes a bucket name, not host:port or user:pass; put the host in ?endpoint=`);
  }
  const prefix = decodeURIComponent(parsed.pathname.replace(/^\//, ''));
  if (prefix.split('/').some((part, i, parts) => part === '' && i !== parts.length - 1) || /[\\]/.test(prefix)) {
    throw new StorageBadUrlError('prefix', `prefix "${prefix}" in ${redact(url)} has empty segments; use s3://bucket/some/prefix`);
  }
  const options: S3BlobStoreOptions = { bucket, ...(prefix ? { prefix } : {}) };
  let accessKeyId: string | undefined;
  let secretAccessKey: string | undefined;
  for (const [name, value] of parsed.searchParams) {
    switch (name) {
      case 'endpoint': {
        let endpoint: URL;
        try {
          endpoint = new URL(value);
        } catch {
          throw new StorageBadUrlError('endpoint', `endpoint=${value} is not a URL; use endpoint=http://127.0.0.1:7480`);
        }
        if (endpoint.protocol !== 'http:' && endpoint.protocol !== 'https:') {
          throw new StorageBadUrlError('endpoint', `endpoint=${value} must start with http:// or https://`);
        }
        options.endpoint = value;
        break;
      }
      case 'region':
        if (!/^[a-z0-9-]+$/.test(value)) throw new StorageBadUrlError('region', `region=${value} is not a region name like us-east-1`);
        options.region = value;
        break;
      case 'forcePathStyle':
        options.forcePathStyle = parseBoolean(name, value);
        break;
      case 'createBucket':
        options.createBucket = parseBoolean(name, value);
        break;
      case 'concurrency':
        options.concurrency = parsePositiveInt(name, value);
        break;
      case 'accessKeyId':
        accessKeyId = value;
        break;
      case 'secretAccessKey':
        secretAccessKey = value;
        break;
      default:
        throw new StorageBadUrlError(
          name,
          `unknown s3 option "${name}" in ${redact(url)}; known: endpoint, region, forcePathStyle, createBucket, concurrency, accessKeyId, secretAccessKey`,
        );
    }
  }
  if ((accessKeyId === undefined) !== (secretAccessKey === undefined)) {
    throw new StorageBadUrlError(
      accessKeyId === undefined ? 'accessKeyId' : 'secretAccessKey',
      `${redact(url)} gives only one of accessKeyId / secretAccessKey; give both, or neither to use AWS_ACCESS_KEY_ID / AWS_SECRET_ACCESS_KEY`,
    );
  }
  if (accessKeyId !== undefined && secretAccessKey !== undefined) options.credentials = { accessKeyId, secretAccessKey };
  return { kind: 's3', options };
}

export function parseBoolean(field: string, value: string): boolean {
  if (value === 'true' || value === '1') return true;
  if (value === 'false' || value === '0') return false;
  throw new StorageBadUrlError(field, `${field}=${value} is not a boolean; use ${field}=true or ${field}=false`);
}

export function parsePositiveInt(field: string, value: string): number {
  const number = Number(value);
  if (!Number.isInteger(number) || number < 1) {
    throw new StorageBadUrlError(field, `${field}=${value} is not a positive integer`);
  }
  return number;
}

/** The URL with any secret query parameter masked, for error messages and logs. */
export function redact(url: string): string {
  return url.replace(/(secretAccessKey|sessionToken)=[^&]*/gi, '$1=***');
}
