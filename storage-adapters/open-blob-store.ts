import { isAbsolute, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

import type { BlobStore } from './blob-store.ts';
import { StorageBadUrlError } from './errors.ts';
import { FsBlobStore, type FsBlobStoreOptions } from './fs-blob-store.ts';

export interface OpenBlobStoreOptions {
  /** Defaults for the fs adapter; options in the URL win. */
  fs?: Partial<Omit<FsBlobStoreOptions, 'dir'>>;
}

/**
 * Opens a store from a `KVTIER_STORAGE`-style string:
 *
 * - `fs:<dir>[?fsync=true&concurrency=64]`, `file:///abs/dir`, or a plain path
 *   (`./data/blocks`, `/mnt/3fs/kv`; taken literally, no options).
 *
 * Anything else is a StorageBadUrlError whose `field` names the wrong part.
 */
export async function openBlobStore(url: string, options: OpenBlobStoreOptions = {}): Promise<BlobStore> {
  const spec = parseBlobStoreUrl(url);
  return FsBlobStore.open({ ...options.fs, ...spec.options });
}

export type BlobStoreSpec = { kind: 'fs'; options: FsBlobStoreOptions };

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
  if (scheme === 'file') {
    try {
      return { kind: 'fs', options: { dir: fileURLToPath(url) } };
    } catch (error) {
      throw new StorageBadUrlError('path', `cannot read a path from ${url}: ${(error as Error).message}; use file:///absolute/dir`);
    }
  }
  throw new StorageBadUrlError('scheme', `unknown storage scheme "${scheme}:" in ${redact(url)}; use fs:<dir> or s3://bucket/prefix?endpoint=…`);
}

function parseFsUrl(url: string): BlobStoreSpec {
  const body = url.slice('fs:'.length).replace(/^\/\/(?=\/)/, ''); // fs:///abs → /abs
  const queryAt = body.indexOf('?');
  const path = queryAt === -1 ? body : body.slice(0, queryAt);
  if (path === '') throw new StorageBadUrlError('path', `${url} names no directory; use fs:/mnt/3fs/kv or fs:./data/blocks`);
  const options: FsBlobStoreOptions = { dir: isAbsolute(path) ? path : resolve(path) };
  const params = new URLSearchParams(queryAt === -1 ? '' : body.slice(queryAt + 1));
  for (const [name, value] of params) {
    if (name === 'fsync') options.fsync = parseBoolean(name, value);
    else if (name === 'concurrency') options.concurrency = parsePositiveInt(name, value);
    else throw new StorageBadUrlError(name, `unknown fs option "${name}" in ${url}; known: fsync, concurrency`);
  }
  return { kind: 'fs', options };
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
