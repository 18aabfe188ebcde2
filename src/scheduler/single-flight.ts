/**
 * Single flight on one worker: concurrent requests sharing an uncached
 * prefix compute it once. The state lives in one registry, the tier's
 * `BlockFlights` (src/kvtier/block-flights.ts: its diagram and invariant),
 * keyed by the prompt's chained block keys; this file is the scheduler's
 * side of it: who claims a block, and what a request whose next block is
 * in flight does.
 *
 *   the next uncached block is…              the request
 *   ───────────────────────────────────────  ───────────────────────────────────────────
 *   computing by an earlier admitted,        waits (deferred) until that one has stored
 *   unfinished request (its owner)           the run of blocks it owns, then looks up again
 *   handed to the tier since this lookup     looks again (its lookup missed them), while
 *   started (its store tick)                 each look finds more blocks than the last
 *   being written (bytes held)               nothing to do: the tier's lookup counts it as
 *                                            a hit and its load reads the held bytes
 *
 * Guarantees:
 * - a no-store request claims nothing (nobody waits for it) and stores
 *   nothing, so it is never served to another request;
 * - a purge flushes the tier's writes before deleting, so nothing purged is
 *   served afterwards;
 * - memory: an ended request's claims go at its end, store ticks once no
 *   lookup in flight started before them (`claimed` is then 0); the bytes of
 *   blocks being written are bounded by the tier's write-behind budget.
 */
import type { BlockFlights, PrefixChain } from '../kvtier/index.ts';
import { SequenceStatus, type RequestSequence } from './sequence.ts';

export type Blocker = { owner: RequestSequence; blocks: number } | 'look-again';

export class ComputingBlocks {
  /** Requests this scheduler claimed blocks for (each its own key): only they are waited for (a registry shared with another scheduler, as in tests, may hold others). */
  private readonly claimants = new WeakMap<object, RequestSequence>();

  /** The tier's registry when the worker has one; else its own (nothing is ever stored then). */
  constructor(private readonly flights: BlockFlights) {}

  /** Keys held for single flight (0 once every request has ended and no lookup is in flight). */
  get size(): number {
    return this.flights.claimed;
  }

  /** At admission: `seq` owns every block of its prompt's cacheable part nobody admitted earlier owns. */
  claim(seq: RequestSequence, blockTokens: number): void {
    const { keys } = seq;
    if (!keys || seq.spec.retention?.noStore) return;
    this.claimants.set(seq, seq);
    for (let i = 0; i < usableBlocks(seq, blockTokens); i++) this.flights.claim(keys.keyHex(i), seq);
  }

  /** A lookup of `seq` starts: blocks handed to the tier from now on were not visible to it. */
  lookupStarted(seq: RequestSequence): void {
    seq.flight.lookupTick = this.flights.tick;
  }

  /** `seq` looks again after its lookup found `cachedBlocks` ('look-again'). */
  lookingAgain(seq: RequestSequence, cachedBlocks: number): void {
    seq.flight.lookedAgainAt = cachedBlocks;
  }

  /** When `seq` ends: it computes nothing more; store ticks no lookup in flight can need go too. */
  release(seq: RequestSequence, active: readonly RequestSequence[]): void {
    if (seq.keys) this.flights.release(seq, keysOf(seq.keys));
    let oldestLookup = Infinity;
    for (const other of active) if (other.status === SequenceStatus.Fetching) oldestLookup = Math.min(oldestLookup, other.flight.lookupTick);
    this.flights.prune(oldestLookup);
  }

  /**
   * After `seq`'s lookup found `cachedBlocks`: its first uncached block was
   * stored since that lookup started ('look-again', while each look finds more), or an
   * earlier request is computing it (wait for the run of blocks from there
   * that it owns), or null: `seq` computes it.
   */
  blockerOf(seq: RequestSequence, cachedBlocks: number, blockTokens: number): Blocker | null {
    const { keys } = seq;
    if (!keys) return null;
    const usable = usableBlocks(seq, blockTokens);
    if (cachedBlocks >= usable) return null;
    const key = keys.keyHex(cachedBlocks);
    // Again only while each look finds more: a block handed over but never readable (a failed write) cannot loop.
    if (this.flights.storedTickOf(key) > seq.flight.lookupTick && cachedBlocks > seq.flight.lookedAgainAt) return 'look-again';
    const owner = this.ownerOf(key);
    if (!owner || owner === seq || owner.queue.order > seq.queue.order || owner.status === SequenceStatus.Decode || owner.storedBlocks > cachedBlocks) return null;
    let blocks = cachedBlocks + 1;
    while (blocks < usable && this.ownerOf(keys.keyHex(blocks)) === owner) blocks++;
    return { owner, blocks };
  }

  /** The block's owner when it is one of this scheduler's requests. */
  private ownerOf(key: string): RequestSequence | null {
    const owner = this.flights.ownerOf(key);
    return owner === null ? null : (this.claimants.get(owner) ?? null);
  }
}

/** Deferred requests whose blocker stored what they wait for, started decoding, or is gone. */
export function releasable(seq: RequestSequence, active: readonly RequestSequence[]): boolean {
  const blocker = seq.flight.waitFor;
  return blocker === null || !active.includes(blocker) || blocker.status === SequenceStatus.Decode || blocker.storedBlocks >= seq.flight.waitBlocks;
}

function* keysOf(keys: PrefixChain): Generator<string> {
  for (let i = 0; i < keys.blockCount; i++) yield keys.keyHex(i);
}

/** Prompt blocks a lookup may return: at least one token is always prefilled to get the next token's logits. */
function usableBlocks(seq: RequestSequence, blockTokens: number): number {
  return Math.min(seq.keys?.blockCount ?? 0, Math.floor((seq.spec.tokens.length - 1) / blockTokens));
}
