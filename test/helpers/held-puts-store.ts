/** Test store: forwards to a real BlobStore, but every `put` waits while the gate is held (reads pass), so blocks stay "being written". */
import { ForwardingStore } from './forwarding-store.ts';

export class HeldPutsStore extends ForwardingStore {
  private gate: Promise<void> = Promise.resolve();
  private openGate: () => void = () => undefined;

  /** Puts from now on wait until `release`. */
  hold(): void {
    this.gate = new Promise((resolve) => (this.openGate = resolve));
  }

  release(): void {
    this.openGate();
    this.gate = Promise.resolve();
  }

  override async put(key: string, bytes: Uint8Array): Promise<void> {
    await this.gate;
    return this.inner.put(key, bytes);
  }
}
