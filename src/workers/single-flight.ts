/**
 * Single flight on one worker, keyed by the prompt's chained block keys:
 * concurrent requests sharing an uncached prefix compute it once.
 *
 *   block key ──▶ who has it                                    consulted by
 *   ─────────────────────────────────────────────────────────  ──────────────────────────
 *   computing    ComputingBlocks (here): the earliest admitted  the fetch phase: a request
 *                unfinished request whose prompt holds it       whose first uncached block
 *                                                               another computes waits
 *   stored, not  KvTier `pending` (src/kvtier/kv-tier.ts): the  KvTier.lookup / load: the
 *   yet durable  encoded block until its index entry commits    waiter's lookup again hits it
 *   here         the tier's index / storage                     KvTier.lookup / load
 *
 * A request's store hands blocks to the tier, which holds them in `pending`
 * at once; so a waiter released here (its blocker stored those blocks) finds
 * them on its next lookup, whether the write has landed or not. The two
 * halves stay apart because "computing" names an engine sequence of this
 * worker (src/kvtier knows no engines), while `pending` serves every reader
 * of the tier. Guarantees:
 * - a no-store request claims nothing (nobody waits for it) and stores
 *   nothing, so it is never served to another request;
 * - a purge flushes the tier's pending writes before deleting, and this map
 *   holds no payloads, so nothing purged is served afterwards;
 * - memory: this map holds keys of admitted prompts only (released when
 *   their request decodes or ends); `pending` is bounded by the tier's
 *   write-behind byte budget.
 */
import type { RequestSequence } from './sequence.ts';

export class ComputingBlocks {
  private readonly owners = new Map<string, RequestSequence>();

  get size(): number {
    return this.owners.size;
  }

  /** At admission: `seq` owns every block of its prompt's cacheable part nobody admitted earlier owns. */
  claim(seq: RequestSequence, blockTokens: number): void {
    if (!seq.keys || seq.job.retention?.noStore) return;
    for (let i = 0; i < usableBlocks(seq, blockTokens); i++) {
      const key = seq.keys.keyHex(i);
      if (!this.owners.has(key)) this.owners.set(key, seq);
    }
  }

  /** When `seq` decodes or ends: its prompt blocks are stored (or will never be). */
  release(seq: RequestSequence): void {
    if (!seq.keys) return;
    for (let i = 0; i < seq.keys.blockCount; i++) {
      const key = seq.keys.keyHex(i);
      if (this.owners.get(key) === seq) this.owners.delete(key);
    }
  }

  /**
   * An earlier request computing the first block past `cachedBlocks` of
   * `seq`'s prompt, and how many of `seq`'s blocks to wait for (the run of
   * blocks from there that it owns); null when `seq` should compute them.
   */
  blockerOf(seq: RequestSequence, cachedBlocks: number, blockTokens: number): { owner: RequestSequence; blocks: number } | null {
    if (!seq.keys) return null;
    const usable = usableBlocks(seq, blockTokens);
    if (cachedBlocks >= usable) return null;
    const owner = this.owners.get(seq.keys.keyHex(cachedBlocks));
    if (!owner || owner === seq || owner.order > seq.order || owner.phase === 'decode' || owner.storedBlocks > cachedBlocks) return null;
    let blocks = cachedBlocks + 1;
    while (blocks < usable && this.owners.get(seq.keys.keyHex(blocks)) === owner) blocks++;
    return { owner, blocks };
  }
}

/** Deferred requests whose blocker stored what they wait for, started decoding, or is gone. */
export function releasable(seq: RequestSequence, active: readonly RequestSequence[]): boolean {
  const blocker = seq.waitFor!;
  return !active.includes(blocker) || blocker.phase === 'decode' || blocker.storedBlocks >= seq.waitBlocks;
}

/** Prompt blocks a lookup may return: at least one token is always prefilled to get the next token's logits. */
function usableBlocks(seq: RequestSequence, blockTokens: number): number {
  return Math.min(seq.keys?.blockCount ?? 0, Math.floor((seq.job.tokens.length - 1) / blockTokens));
}
