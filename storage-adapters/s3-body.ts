/** Reading an S3 GET body into one buffer, bounded by the caller's maxBytes. Split from s3-blob-store.ts by concern. */
import type { Readable } from 'node:stream';

import { StorageIoError, StorageTooLargeError } from './errors.ts';

/**
 * Reads a response body into one right-sized buffer when the length is known
 * (one copy out of the socket chunks, no concat), else collects and joins.
 * Nothing is allocated from the server's word past `maxBytes`: a Content-Length
 * above it is refused before the buffer, a body without one as soon as its
 * chunks pass it; a body longer than its Content-Length is refused before it
 * would be written past the buffer.
 */
export async function readBody(
  body: Readable | undefined,
  contentLength: number | undefined,
  allocate: ((size: number) => Uint8Array) | undefined,
  maxBytes = Number.POSITIVE_INFINITY,
  what = 's3 object',
): Promise<Uint8Array> {
  if (body === undefined) return new Uint8Array(0);
  const refuse = (error: Error): never => {
    body.destroy();
    throw error;
  };
  if (contentLength === undefined) {
    const chunks: Buffer[] = [];
    let total = 0;
    for await (const chunk of body) {
      total += (chunk as Buffer).byteLength;
      if (total > maxBytes) refuse(new StorageTooLargeError(`${what} (no Content-Length)`, total, maxBytes));
      chunks.push(chunk as Buffer);
    }
    const joined = Buffer.concat(chunks);
    return new Uint8Array(joined.buffer, joined.byteOffset, joined.byteLength);
  }
  if (!Number.isSafeInteger(contentLength) || contentLength < 0) refuse(new StorageIoError(`s3 get: ${what} has Content-Length ${contentLength}, not a byte count`));
  if (contentLength > maxBytes) refuse(new StorageTooLargeError(what, contentLength, maxBytes));
  let out: Uint8Array;
  try {
    out = allocate?.(contentLength) ?? new Uint8Array(contentLength);
  } catch (error) {
    return refuse(new StorageIoError(`s3 get: no buffer of ${contentLength} bytes for ${what}: ${(error as Error).message}`, { cause: error }));
  }
  if (out.byteLength !== contentLength) refuse(new StorageIoError(`s3 get: allocate(${contentLength}) returned ${out.byteLength} bytes`));
  let offset = 0;
  try {
    for await (const chunk of body) {
      const bytes = chunk as Buffer;
      if (offset + bytes.byteLength > contentLength) {
        throw new StorageIoError(`s3 get: body is longer than its Content-Length ${contentLength}`);
      }
      out.set(bytes, offset);
      offset += bytes.byteLength;
    }
  } catch (error) {
    body.destroy();
    throw error;
  }
  if (offset !== contentLength) {
    throw new StorageIoError(`s3 get: body ended after ${offset} of ${contentLength} bytes (connection cut mid-object)`);
  }
  return out;
}
