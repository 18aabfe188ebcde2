import { PROBE_ABSENT } from './block-index-records.ts';
import { LookupResult, type KvNamespace, type RequestScope } from './kv-tier-types.ts';
import type { PrefixChain } from './prefix-hasher.ts';
import type { RetentionPolicy } from './retention-policy.ts';
import type { TierCore } from './tier-core.ts';

/** Lookup stop reason: the node index threw; neither the plane nor storage is asked (it would go around a broken cache). */
const PROBE_INDEX_BROKEN = -3;

/**
 * KvTier.lookup: the longest run of cached full blocks from the start of
 * `tokens`, asking in turn the node index (and blocks still being written, block-flights.ts),
 * the metadata plane, then storage itself when the plane is not trusted.
 * Hits whose last use is older than `touchIntervalMs` are renewed.
 */
export async function lookupPrefix(core: TierCore, namespace: KvNamespace, tokens: Uint32Array, scope: RequestScope, given?: PrefixChain): Promise<LookupResult> {
  const policy = core.policy.current();
  core.assertScope(scope, policy);
  const { hasher, blockTokens } = core;
  // The caller's chain of these tokens (a request's prompt is hashed once, at admission), if its root is this namespace's.
  const chain =
    given !== undefined &&
    given.blockTokens === blockTokens &&
    given.blockCount === Math.floor(tokens.length / blockTokens) &&
    Buffer.from(given.rootKey).equals(hasher.chain(namespace.keyBytes, new Uint32Array(0)).rootKey)
      ? given
      : hasher.chain(namespace.keyBytes, tokens);
  const now = core.clock.now();
  const touchIntervalMs = core.options.touchIntervalMs ?? 60_000;
  const blockCount = chain.blockCount;
  const reuseGaps = core.reuseGaps;
  let hits = 0;
  let stop = PROBE_ABSENT;
  const stale: number[] = [];
  try {
    for (; hits < blockCount; hits++) {
      const lastUse = core.liveEntries.probeBlock(chain, hits, now, policy);
      if (lastUse < 0) {
        // Absent (or expired) in the index but being written here: a hit, renewed; its write records the renewal (tier-store.ts).
        const previous = core.flights.useWhileWriting(chain.keyHex(hits), now);
        if (previous >= 0) {
          reuseGaps.note(scope.trafficClass, now - previous, chain.blockTokens);
          continue;
        }
        stop = lastUse;
        break;
      }
      // The what-if's one hook: this hit's gap since the block's previous use.
      reuseGaps.note(scope.trafficClass, now - lastUse, chain.blockTokens);
      if (now - lastUse >= touchIntervalMs) stale.push(hits);
    }
  } catch (error) {
    core.noteError(error, 'index probe failed; treating the rest as a miss');
    stop = PROBE_INDEX_BROKEN; // do not go around a broken index to storage
  }
  let adopted = 0;
  if (hits < blockCount && stop !== PROBE_INDEX_BROKEN) {
    // The plane knows what other nodes wrote and used (plane-link.ts).
    const fromPlane = await core.planeLink.probe(chain, hits, now, policy);
    hits += fromPlane.found;
    adopted += fromPlane.found;
    // Without a trusted plane: an absent entry may be another node's block on storage; an
    // expired local entry ends the run (its blob may still be on storage until GC runs).
    if (!fromPlane.trusted && hits < blockCount && (stop === PROBE_ABSENT || fromPlane.found > 0)) {
      const fromStorage = await probeStorage(core, chain, hits, scope, now, policy);
      hits += fromStorage;
      adopted += fromStorage;
    }
  }
  if (stale.length > 0) {
    core.track(
      core.index.touch(
        stale.map((i) => chain.keyBytes(i).slice()),
        now,
        policy,
      ),
      'index touch failed',
    );
    for (const i of stale) core.liveEntries.renewed(chain.keyHex(i), now);
    core.planeLink.renew(
      stale.map((i) => chain.keyHex(i)),
      now,
      stale,
    );
  }
  const c = core.counters;
  c.lookups++;
  c.hitBlocks += hits;
  c.missBlocks += blockCount - hits;
  c.hitTokens += hits * chain.blockTokens;
  c.missTokens += tokens.length - hits * chain.blockTokens;
  c.adoptedBlocks += adopted;
  return new LookupResult(namespace, tokens, { tenant: scope.tenant, trafficClass: scope.trafficClass }, chain, hits, adopted);
}

/** Windowed `has` over the keys the index lacks: 8, 32, 128, … keys per round trip. Returns how many contiguous blocks exist. */
async function probeStorage(core: TierCore, chain: PrefixChain, from: number, scope: RequestScope, now: number, policy: RetentionPolicy): Promise<number> {
  let window = core.options.probeWindow ?? 8;
  let position = from;
  const found: { keyBytes: Uint8Array; trafficClass: string; tenant: string; depth: number }[] = [];
  while (position < chain.blockCount) {
    const end = Math.min(chain.blockCount, position + window);
    const keys: string[] = [];
    for (let i = position; i < end; i++) keys.push(chain.keyHex(i));
    let present: boolean[];
    try {
      present = await core.blobStore.has(keys);
    } catch (error) {
      core.noteError(error, 'storage has() failed; treating the rest as a miss');
      break;
    }
    let run = 0;
    while (run < present.length && present[run]) run++;
    for (let i = position; i < position + run; i++) {
      found.push({ keyBytes: chain.keyBytes(i).slice(), trafficClass: scope.trafficClass, tenant: scope.tenant, depth: i });
    }
    position += run;
    if (run < present.length) break;
    window *= 4;
  }
  if (found.length > 0) core.track(core.index.adopt(found, now, policy), 'index adopt failed');
  return found.length;
}
