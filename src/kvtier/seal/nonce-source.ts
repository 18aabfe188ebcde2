import { randomBytes } from 'node:crypto';

import { SEAL_NONCE_BYTES } from './seal-envelope.ts';

const COUNTER_LIMIT = 0x1_0000_0000; // u32

/**
 * 96-bit GCM nonces that one sealer never repeats: an 8-byte random prefix
 * drawn when the source is made, then a u32 counter (0, 1, 2, …); when the
 * counter would wrap, a fresh prefix is drawn and the counter restarts.
 *
 * Within a source two nonces differ in the counter or the prefix draw. Across
 * sources (processes, restarts, nodes) sharing a tenant key, a repeat needs
 * two equal 64-bit prefix draws: with P draws per key in its lifetime the
 * chance is at most P²/2^65 (P = 2^20 starts → below 2^-25), and it would
 * also need the two counters to meet. Fully random 96-bit nonces give about
 * N²/2^97 for N blocks per key, which overtakes this bound once one process
 * seals more than ~2^16 blocks per restart — the common case for a server.
 */
export class NonceSource {
  private prefix: Buffer = randomBytes(8);
  private counter = 0;
  /** Fresh prefixes drawn since creation (the first included). */
  prefixDraws = 1;

  /** `startCounter` is for tests only (to reach the wrap without 2^32 calls). */
  constructor(startCounter = 0) {
    this.counter = startCounter;
  }

  /** Writes the next nonce into `out` at `offset` (12 bytes). */
  next(out: Uint8Array, offset: number): void {
    if (this.counter >= COUNTER_LIMIT) {
      this.prefix = randomBytes(8);
      this.prefixDraws++;
      this.counter = 0;
    }
    out.set(this.prefix, offset);
    const c = this.counter++;
    out[offset + 8] = c & 0xff;
    out[offset + 9] = (c >>> 8) & 0xff;
    out[offset + 10] = (c >>> 16) & 0xff;
    out[offset + 11] = (c >>> 24) & 0xff;
  }

  /** A new 12-byte nonce. */
  take(): Uint8Array {
    const nonce = new Uint8Array(SEAL_NONCE_BYTES);
    this.next(nonce, 0);
    return nonce;
  }
}
