export type { BlobStore, GetOptions } from './blob-store.ts';
export * from './errors.ts';
export { MAX_KEY_LENGTH, assertValidKey, assertValidPrefix } from './keys.ts';
export { FsBlobStore, type FsBlobStoreOptions } from './fs-blob-store.ts';
export type { FsBatchWriter } from './fs-put-batcher.ts';
export { openBlobStore, parseBlobStoreUrl, type BlobStoreSpec, type OpenBlobStoreOptions } from './open-blob-store.ts';
export { SegmentBlobStore, type SegmentBlobStoreOptions } from './segment-blob-store.ts';
export type { CompactOptions, CompactReport } from './segment-compact.ts';
export { S3BlobStore, type S3BlobStoreOptions, type S3Credentials } from './s3-blob-store.ts';
