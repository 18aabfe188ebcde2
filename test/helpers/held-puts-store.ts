/** Test store: forwards to a real BlobStore, but every `put` waits while the gate is held (reads pass), so blocks stay "being written". */
import type { BlobStore, GetOptions } from '../../storage-adapters/index.ts';

export class HeldPutsStore implements BlobStore {
  readonly kind: string;
  readonly location: string;
  private gate: Promise<void> = Promise.resolve();
  private openGate: () => void = () => undefined;

  constructor(private readonly inner: BlobStore) {
    this.kind = inner.kind;
    this.location = inner.location;
  }

  /** Puts from now on wait until `release`. */
  hold(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }

  release(): void {
    this.openGate();
    this.gate = Promise.resolve();
  }

  async put(key: string, bytes: Uint8Array): Promise<void> {
    await this.gate;
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
