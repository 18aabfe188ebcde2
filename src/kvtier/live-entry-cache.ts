import type { NodeIndex } from './node-index.ts';
import type { PrefixChain } from './prefix-hasher.ts';
import type { RetentionPolicy } from './retention-policy.ts';

/**
 * A bounded memo of "this key is live in the local index until T", in
 * front of `NodeIndex.probe`.
 *
 * Why: an LMDB get from JS costs ≈0.7 µs (a native call), so probing the
 * 2048 blocks of a 128k-token prompt took ≈1.5 ms on its own; a Map hit is
 * ≈0.1 µs. The memo only ever answers "live", and only until the expiry it
 * computed under the policy version it was filled with (a policy change
 * empties it). Removals made through this process drop their keys. A
 * removal made by another process sharing the index can leave a stale
 * "live": load() then finds the blob gone and reports a miss — never a
 * wrong block, never one past its expiry.
 *
 * Entries are evicted in insertion order beyond `maxEntries`.
 */
export class LiveEntryCache {
  private readonly entries = new Map<string, { expiresAt: number; lastUse: number }>();
  private policyVersion = -1;
  private readonly scratch = new Float64Array(1);

  constructor(
    private readonly index: NodeIndex,
    private readonly maxEntries: number,
  ) {}

  /** Block i of `chain`: same answers as `NodeIndex.probe` (last use when live, else PROBE_ABSENT / PROBE_EXPIRED). */
  probeBlock(chain: PrefixChain, i: number, now: number, policy: RetentionPolicy): number {
    if (policy.version === this.policyVersion) {
      const known = this.entries.get(chain.keyHex(i));
      if (known !== undefined && known.expiresAt > now) return known.lastUse;
    }
    // The key bytes view is made only on a memo miss.
    return this.probe(chain.keyHex(i), chain.keyBytes(i), now, policy);
  }

  /** Same answers as `NodeIndex.probe`: last use when live, else PROBE_ABSENT / PROBE_EXPIRED. */
  probe(key: string, keyBytes: Uint8Array, now: number, policy: RetentionPolicy): number {
    if (policy.version !== this.policyVersion) {
      this.entries.clear();
      this.policyVersion = policy.version;
    }
    const known = this.entries.get(key);
    if (known !== undefined && known.expiresAt > now) return known.lastUse;
    if (this.maxEntries === 0) return this.index.probe(keyBytes, now, policy, undefined, key);
    const lastUse = this.index.probe(keyBytes, now, policy, this.scratch, key);
    if (lastUse < 0) {
      if (known !== undefined) this.entries.delete(key);
      return lastUse;
    }
    this.remember(key, this.scratch[0], lastUse);
    return lastUse;
  }

  /** After a touch: the entry is live for another TTL from `now`. */
  renewed(key: string, now: number): void {
    const known = this.entries.get(key);
    if (known !== undefined) {
      known.expiresAt = now + (known.expiresAt - known.lastUse);
      known.lastUse = now;
    }
  }

  forget(key: string): void {
    this.entries.delete(key);
  }

  clear(): void {
    this.entries.clear();
  }

  private remember(key: string, expiresAt: number, lastUse: number): void {
    this.entries.delete(key);
    this.entries.set(key, { expiresAt, lastUse });
    if (this.entries.size > this.maxEntries) {
      const oldest = this.entries.keys().next();
      if (!oldest.done) this.entries.delete(oldest.value);
    }
  }
}
