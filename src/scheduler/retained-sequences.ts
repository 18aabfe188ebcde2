/**
 * Finished sequences kept in the engine's KV pool: the tier's L0, in the
 * way vLLM keeps freed blocks cached in GPU memory and SGLang keeps its
 * radix tree. A conversation's next turn starts with exactly the previous
 * prompt + reply, so adopting that sequence skips the lookup, the load, the
 * import copy, and the recompute of the partial last block the tier
 * cannot hold (blocks are whole 64-token units).
 *
 *   finished request ─ put ─▶ [ oldest … newest ] ─ take(salt, prompt) ─▶ longest shared prefix, same tenant salt
 *                              │
 *                              └─ evictOldest() when the pool needs the pages, or beyond `capacity`
 *
 * Only the tenant's own sequences are candidates (salt equality), so reuse
 * cannot cross the tenant boundary any more than a tier lookup can.
 */
import { freeKv } from './postprocess.ts';
import type { RequestSequence } from './sequence.ts';

/**
 * Entries are the finished requests' own records (sequence.ts), status
 * `Retained` (set by postprocess.ts): their `kv` holds the K/V of
 * `fedTokens`, `storedBlocks` of which were handed to the cache.
 */
export class RetainedSequences {
  private readonly entries: RequestSequence[] = [];

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.entries.length;
  }

  /** Keeps `entry` (false: this pool keeps nothing, the caller frees it). */
  put(entry: RequestSequence): boolean {
    if (this.capacity <= 0) return false;
    this.entries.push(entry);
    while (this.entries.length > this.capacity) this.evictOldest();
    return true;
  }

  /**
   * Removes and returns the entry sharing the longest prefix with `prompt`
   * (at most `maxTokens` of it reusable), or null when none shares a token.
   * The caller owns the record from here: adopt its KV (postprocess.ts),
   * or give it back (postprocess.ts `retain`).
   */
  take(tenantSalt: string, prompt: ArrayLike<number>, maxTokens: number): { entry: RequestSequence; reusable: number } | null {
    let best = -1;
    let bestShared = 0;
    this.entries.forEach((entry, i) => {
      if (entry.tenantSalt !== tenantSalt) return;
      const fed = entry.fedTokens.view;
      const n = Math.min(fed.length, prompt.length, maxTokens);
      let shared = 0;
      while (shared < n && fed[shared] === prompt[shared]) shared++;
      if (shared > bestShared) {
        best = i;
        bestShared = shared;
      }
    });
    if (best === -1) return null;
    const [entry] = this.entries.splice(best, 1);
    return { entry, reusable: bestShared };
  }

  /** Frees the least recently finished sequence; false when there is none. */
  evictOldest(): boolean {
    const entry = this.entries.shift();
    if (!entry) return false;
    freeKv(entry);
    return true;
  }

  clear(): void {
    while (this.evictOldest());
  }
}
