/**
 * Finished sequences kept in the engine's KV pool: the tier's L0, in the
 * way vLLM keeps freed blocks cached in GPU memory and SGLang keeps its
 * radix tree. A conversation's next turn starts with exactly the previous
 * prompt + reply, so adopting that sequence skips the lookup, the load, the
 * import copy, and the recompute of the partial last block the tier
 * cannot hold (blocks are whole 64-token units).
 *
 *   finished run ─ put ─▶ [ oldest … newest ] ─ take(salt, prompt) ─▶ longest shared prefix, same tenant salt
 *                              │
 *                              └─ evictOldest() when the pool needs the pages, or beyond `capacity`
 *
 * Only the tenant's own sequences are candidates (salt equality), so reuse
 * cannot cross the tenant boundary any more than a tier lookup can.
 */
import type { EngineSequence } from './ports.ts';

export interface RetainedSequence {
  sequence: EngineSequence;
  /** Tokens whose K/V the sequence holds. */
  tokens: number[];
  tenantSalt: string;
  /** Full blocks of `tokens` already handed to the cache. */
  storedBlocks: number;
}

export class RetainedSequences {
  private readonly entries: RetainedSequence[] = [];

  constructor(private readonly capacity: number) {}

  get size(): number {
    return this.entries.length;
  }

  put(entry: RetainedSequence): void {
    if (this.capacity <= 0) {
      entry.sequence.free();
      return;
    }
    this.entries.push(entry);
    while (this.entries.length > this.capacity) this.evictOldest();
  }

  /**
   * Removes and returns the entry sharing the longest prefix with `prompt`
   * (at most `maxTokens` of it reusable), or null when none shares a token.
   * The caller owns the sequence from here: truncate it to `reusable`, or
   * give it back with put().
   */
  take(tenantSalt: string, prompt: readonly number[], maxTokens: number): { entry: RetainedSequence; reusable: number } | null {
    let best = -1;
    let bestShared = 0;
    this.entries.forEach((entry, i) => {
      if (entry.tenantSalt !== tenantSalt) return;
      const n = Math.min(entry.tokens.length, prompt.length, maxTokens);
      let shared = 0;
      while (shared < n && entry.tokens[shared] === prompt[shared]) shared++;
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
    entry.sequence.free();
    return true;
  }

  clear(): void {
    while (this.evictOldest());
  }
}
