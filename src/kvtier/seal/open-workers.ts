import { availableParallelism } from 'node:os';
import { Worker } from 'node:worker_threads';

import { SEAL_TAG_BYTES } from './seal-envelope.ts';

/**
 * Threads that run AES-256-GCM decryption off the caller's thread, so opening
 * a sealed block overlaps the reads and checksum checks of the blocks around
 * it instead of adding to them (a load reads 8 blocks at a time).
 *
 *   caller ── ciphertext‖tag (one copy, transferred), key, nonce, aad ──▶ thread: decrypt + verify tag
 *   caller ◀── plaintext (transferred, no copy) or "auth failed" ──────── thread
 *
 * Plain JavaScript evaluated in the thread (no TypeScript loader needed), using
 * node:crypto as the synchronous path does; plaintext comes back only after
 * the tag verified. Threads are unref'd: they never keep a process alive.
 */
const WORKER_SOURCE = `
const { parentPort } = require('node:worker_threads');
const { createDecipheriv } = require('node:crypto');
parentPort.on('message', (m) => {
  const data = new Uint8Array(m.data);
  const tagAt = data.byteLength - ${SEAL_TAG_BYTES};
  let plain;
  try {
    const decipher = createDecipheriv('aes-256-gcm', m.key, m.nonce, { authTagLength: ${SEAL_TAG_BYTES} });
    decipher.setAAD(m.aad);
    decipher.setAuthTag(data.subarray(tagAt));
    plain = decipher.update(data.subarray(0, tagAt));
    decipher.final();
  } catch (error) {
    if (plain) plain.fill(0);
    parentPort.postMessage({ id: m.id, ok: false, message: String((error && error.message) || error) });
    return;
  }
  const whole = plain.byteOffset === 0 && plain.byteLength === plain.buffer.byteLength;
  const out = whole ? plain.buffer : plain.buffer.slice(plain.byteOffset, plain.byteOffset + plain.byteLength);
  parentPort.postMessage({ id: m.id, ok: true, plain: out }, [out]);
});
`;

/**
 * One less than the cores, at most 4 — and none on 2 cores or fewer: there
 * the loading thread and libuv's readers already fill the machine, and a
 * hand-off only adds waiting (measured: bench/storage-seal.ts, seal_threads_*).
 */
export function defaultOpenThreads(): number {
  const cores = availableParallelism();
  return cores <= 2 ? 0 : Math.min(4, cores - 1);
}

interface Pending {
  resolve: (plain: Uint8Array | null) => void;
  reject: (error: Error) => void;
}

/** One opened block: plaintext, or null when the tag did not verify. */
export type OpenOutcome = Uint8Array | null;

export class OpenWorkers {
  private readonly workers: Worker[] = [];
  private readonly pending = new Map<number, Pending>();
  private readonly inFlight: number[];
  private nextId = 0;
  private broken: Error | undefined;

  constructor(readonly size: number) {
    this.inFlight = new Array<number>(size).fill(0);
  }

  /** False once a thread failed; callers then open on their own thread. */
  get usable(): boolean {
    return this.broken === undefined;
  }

  /** Decrypts `ciphertextAndTag` (copied once) on the least busy thread. */
  open(ciphertextAndTag: Uint8Array, key: Uint8Array, nonce: Uint8Array, aad: Uint8Array): Promise<OpenOutcome> {
    if (this.broken) return Promise.reject(this.broken);
    this.start();
    let slot = 0;
    for (let i = 1; i < this.size; i++) if (this.inFlight[i] < this.inFlight[slot]) slot = i;
    const id = this.nextId++;
    const data = ciphertextAndTag.slice(); // own ArrayBuffer: moved to the thread, not copied again
    return new Promise<OpenOutcome>((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.inFlight[slot]++;
      const worker = this.workers[slot];
      if (this.inFlight[slot] === 1) worker.ref();
      worker.postMessage({ id, slot, data: data.buffer, key: Uint8Array.from(key), nonce: Uint8Array.from(nonce), aad: Uint8Array.from(aad) }, [data.buffer]);
    });
  }

  async close(): Promise<void> {
    const workers = this.workers.splice(0);
    await Promise.all(workers.map((w) => w.terminate()));
  }

  private start(): void {
    if (this.workers.length > 0) return;
    for (let slot = 0; slot < this.size; slot++) {
      const worker = new Worker(WORKER_SOURCE, { eval: true });
      worker.unref();
      worker.on('message', (m: { id: number; ok: boolean; plain?: ArrayBuffer; message?: string }) => {
        const waiting = this.pending.get(m.id);
        if (waiting === undefined) return;
        this.pending.delete(m.id);
        if (--this.inFlight[slot] === 0) worker.unref();
        waiting.resolve(m.ok ? new Uint8Array(m.plain!) : null);
      });
      worker.on('error', (error) => this.fail(error));
      worker.on('exit', (code) => {
        if (this.pending.size > 0) this.fail(new Error(`a seal open thread exited (code ${code}) with blocks in flight`));
      });
      this.workers.push(worker);
    }
  }

  private fail(error: Error): void {
    this.broken ??= error;
    for (const waiting of this.pending.values()) waiting.reject(error);
    this.pending.clear();
  }
}
