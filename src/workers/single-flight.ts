/**
 * Single flight on one worker, keyed by the prompt's chained block keys:
 * concurrent requests sharing an uncached prefix compute it once.
 *
 *   block key ──▶ who has it                                    consulted by
 *   ─────────────────────────────────────────────────────────  ──────────────────────────
 *   computing    ComputingBlocks (here): the earliest admitted  the fetch phase: a request
 *                unfinished request whose prompt holds it       whose first uncached block
 *                                                               another computes waits
 *   just stored  ComputingBlocks (here): when it was handed to  the fetch phase: a lookup
 *                the tier (a tick, no payload)                  that started before it looks
 *                                                               again (once) instead of
 *                                                               computing it
 *   stored, not  KvTier `pending` (src/kvtier/tier-core.ts): the KvTier.lookup / load: the
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
 * - memory: this map holds keys of admitted prompts' blocks only; an ended
 *   request's keys go at its end, except store ticks a lookup still in
 *   flight may need (pruned at every end); `pending` is bounded by the
 *   tier's write-behind byte budget.
 */
import type { RequestSequence } from './sequence.ts';

interface Flight {
  /** The earliest admitted unfinished request computing this block (null once it ended). */
  owner: RequestSequence | null;
  /** Store tick when the block was handed to the tier (0: not yet). */
  storedTick: number;
}

export type Blocker = { owner: RequestSequence; blocks: number } | 'look-again';

export class ComputingBlocks {
  private readonly flights = new Map<string, Flight>();
  private tick = 0;

  get size(): number {
    return this.flights.size;
  }

  /** At admission: `seq` owns every block of its prompt's cacheable part nobody admitted earlier owns. */
  claim(seq: RequestSequence, blockTokens: number): void {
    if (!seq.keys || seq.job.retention?.noStore) return;
    for (let i = 0; i < usableBlocks(seq, blockTokens); i++) {
      const key = seq.keys.keyHex(i);
      const flight = this.flights.get(key);
      if (!flight) this.flights.set(key, { owner: seq, storedTick: 0 });
      else flight.owner ??= seq;
    }
  }

  /** A lookup of `seq` starts: blocks stored from now on were not visible to it. */
  lookupStarted(seq: RequestSequence): void {
    seq.lookupTick = this.tick;
  }

  /** Blocks [fromBlock, toBlock) of `seq` were handed to the tier (only its prompt's are keyed here). */
  stored(seq: RequestSequence, fromBlock: number, toBlock: number): void {
    if (!seq.keys || seq.job.retention?.noStore) return;
    const tick = ++this.tick;
    for (let i = fromBlock; i < Math.min(toBlock, seq.keys.blockCount); i++) {
      const flight = this.flights.get(seq.keys.keyHex(i));
      if (flight) flight.storedTick = tick;
    }
  }

  /** When `seq` ends: it computes nothing more; store ticks no lookup in flight can need go too. */
  release(seq: RequestSequence, active: readonly RequestSequence[]): void {
    if (seq.keys) {
      for (let i = 0; i < seq.keys.blockCount; i++) {
        const flight = this.flights.get(seq.keys.keyHex(i));
        if (flight?.owner === seq) flight.owner = null;
      }
    }
    let oldestLookup = Infinity;
    for (const other of active) if (other.phase === 'fetching') oldestLookup = Math.min(oldestLookup, other.lookupTick);
    for (const [key, flight] of this.flights) if (flight.owner === null && flight.storedTick <= oldestLookup) this.flights.delete(key);
  }

  /**
   * After `seq`'s lookup found `cachedBlocks`: its first uncached block was
   * stored since that lookup started ('look-again', once per request), or an
   * earlier request is computing it (wait for the run of blocks from there
   * that it owns), or null: `seq` computes it.
   */
  blockerOf(seq: RequestSequence, cachedBlocks: number, blockTokens: number): Blocker | null {
    if (!seq.keys) return null;
    const usable = usableBlocks(seq, blockTokens);
    if (cachedBlocks >= usable) return null;
    const flight = this.flights.get(seq.keys.keyHex(cachedBlocks));
    if (!flight) return null;
    if (flight.storedTick > seq.lookupTick && !seq.lookedAgain) return 'look-again';
    const { owner } = flight;
    if (!owner || owner === seq || owner.order > seq.order || owner.phase === 'decode' || owner.storedBlocks > cachedBlocks) return null;
    let blocks = cachedBlocks + 1;
    while (blocks < usable && this.flights.get(seq.keys.keyHex(blocks))?.owner === owner) blocks++;
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
