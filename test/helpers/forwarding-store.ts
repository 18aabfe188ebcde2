/** Test stores: a BlobStore that forwards every call to a real one; a subclass overrides the calls it holds back or counts. */
import type { BlobStore, GetOptions } from '../../storage-adapters/index.ts';

export class ForwardingStore implements BlobStore {
  readonly kind: string;
  readonly location: string;

  constructor(protected readonly inner: BlobStore) {
    this.kind = inner.kind;
    this.location = inner.location;
  }

  put(key: string, bytes: Uint8Array): Promise<void> {
    return this.inner.put(key, bytes);
  }
  get(key: string, options?: GetOptions): Promise<Uint8Array | null> {
    return this.inner.get(key, options);
  }
  has(keys: readonly string[]): Promise<boolean[]> {
    return this.inner.has(keys);
  }
  delete(keys: readonly string[]): Promise<void> {
    return this.inner.delete(keys);
  }
  list(prefix?: string): AsyncIterable<string> {
    return this.inner.list(prefix);
  }
  close(): Promise<void> {
    return this.inner.close();
  }
}
