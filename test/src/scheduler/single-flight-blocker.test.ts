/**
 * ComputingBlocks.blockerOf, the scheduler's side of single flight, on a real
 * BlockFlights registry and real key chains: what a request does when its
 * lookup missed blocks that its owner handed to the tier while the lookup ran.
 */
import { beforeAll, describe, expect, it } from 'vitest';

import { BlockFlights, PrefixHasher, type PrefixChain } from '../../../src/kvtier/index.ts';
import { RequestSequence, SequenceStatus } from '../../../src/scheduler/sequence.ts';
import { ComputingBlocks } from '../../../src/scheduler/single-flight.ts';
import { schedulerJob } from './scheduler-fixtures.ts';

const BLOCK = 4;
let chain: PrefixChain;
const tokens = Array.from({ length: 10 * BLOCK + 3 }, (_, i) => i + 1);

beforeAll(async () => {
  const hasher = await PrefixHasher.create({ blockTokens: BLOCK });
  chain = hasher.chain(hasher.namespaceKeyBytes({ modelFingerprint: 'm', tenantSalt: 's' }), Uint32Array.from(tokens));
});

function sequence(id: string, order: number): RequestSequence {
  const seq = new RequestSequence(schedulerJob(id, tokens), order, BLOCK, 0);
  seq.prefix = { namespace: null as never, keys: chain };
  return seq;
}

/** The owner hands blocks [from, to) to the tier (one store tick). */
function store(flights: BlockFlights, owner: RequestSequence, from: number, to: number): void {
  const tick = flights.nextTick();
  for (let i = from; i < to; i++) flights.stored(chain.keyHex(i), tick);
  owner.storedBlocks = to;
}

/** `a` prefilling the prompt's blocks, `b` claiming the same ones after it. */
function ownerAndWaiter(): { flights: BlockFlights; computing: ComputingBlocks; owner: RequestSequence; waiter: RequestSequence } {
  const flights = new BlockFlights();
  const computing = new ComputingBlocks(flights);
  const owner = sequence('a', 0);
  const waiter = sequence('b', 1);
  owner.status = SequenceStatus.Prefill;
  computing.claim(owner, BLOCK);
  computing.claim(waiter, BLOCK);
  return { flights, computing, owner, waiter };
}

describe('single flight: a lookup that missed blocks stored while it ran', () => {
  it('looks again as long as each look finds more, then waits or computes as before', () => {
    const { flights, computing, owner, waiter } = ownerAndWaiter();

    // Look 1 starts, the owner stores blocks 0-1 meanwhile; it found nothing.
    computing.lookupStarted(waiter);
    store(flights, owner, 0, 2);
    expect(computing.blockerOf(waiter, 0, BLOCK)).toBe('look-again');
    computing.lookingAgain(waiter, 0);

    // Look 2 starts, the owner stores blocks 2-7 meanwhile; it found 2. Before the fix the
    // second look-again was refused and, the owner having stored past block 2, `b` computed 2-9 itself.
    computing.lookupStarted(waiter);
    store(flights, owner, 2, 8);
    expect(computing.blockerOf(waiter, 2, BLOCK)).toBe('look-again');
    computing.lookingAgain(waiter, 2);

    // Look 3 finds all 8 stored: blocks 8-9 are still being computed by the owner, so it waits for them.
    computing.lookupStarted(waiter);
    expect(computing.blockerOf(waiter, 8, BLOCK)).toEqual({ owner, blocks: 10 });
  });

  it('a look that finds no more than the last one computes instead of looking again (a write that never became readable)', () => {
    const { flights, computing, owner, waiter } = ownerAndWaiter();
    computing.lookupStarted(waiter);
    store(flights, owner, 0, 3);
    expect(computing.blockerOf(waiter, 0, BLOCK)).toBe('look-again');
    computing.lookingAgain(waiter, 0);
    // The stored blocks' writes failed: the next look still finds 0, and block 0 is stored, not computing.
    computing.lookupStarted(waiter);
    store(flights, owner, 3, 4);
    expect(computing.blockerOf(waiter, 0, BLOCK)).toBeNull();
  });
});
