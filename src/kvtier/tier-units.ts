import type { KvNamespace, RequestScope } from './kv-tier-types.ts';
import { LookupResult } from './kv-tier-types.ts';
import { effectiveTtlMs, type BlockRecord } from './metadata/metadata-plane.ts';
import { KvTierConfigError } from './errors.ts';
import { bytesToHex } from './hex.ts';
import { KV_DTYPES, type KvDtype } from './kv-layout.ts';
import { KEY_BYTES, type PrefixChain } from './prefix-hasher.ts';
import type { TailToEncode } from './tail-codec.ts';
import type { TailSectionRecord } from './tail-sections.ts';
import type { TierCore } from './tier-core.ts';
import { lookupPrefix } from './tier-lookup.ts';

/**
 * Prefix units in the tier (issue #26). A unit at position p is the engine's
 * whole state after tokens[0 .. p): the block-concatenable layers' first
 * floor(p/B) blocks — ordinary blocks, shared by every unit on the prefix —
 * and one tail blob (tail-codec.ts) under the unit's key
 * (PrefixHasher.unitKeyBytes: the chained key of the full blocks plus the
 * tokens after them).
 *
 * A tail is stored and kept exactly as a block is: the same BlobStore, one
 * record in this node's index and in the metadata plane (class, tenant,
 * size, last use, depth = its block count), so retention classes, quotas,
 * GC (expiry, LRU eviction, orphan sweep, rebuild), purge, tenant salt
 * (in the key), encryption (sealed with the tail key as associated data)
 * and compression (the policy's codec on its kv sections) apply unchanged.
 *
 * Lookup (DeepSeek's rule): the longest unit whose whole prefix matches.
 * Candidates are the positions p ≤ maxPosition whose blocks are all live
 * (p < (h+1)·B for h hit blocks), newest first; the first key live in the
 * index (or being written) wins, and the plane is asked for the keys above
 * it that the index lacks (units other nodes wrote). Cost: one key hash and
 * one memoized index probe per candidate position, ≤ (h+1)·B of them (a miss
 * over a 4k prompt: 4k probes, ~2 ms), and one plane round trip per 512 keys.
 * Load: tier-unit-load.ts.
 */

export interface UnitStoreRequest extends RequestScope {
  namespace: KvNamespace;
  /** The unit's prefix: p = tokens.length. */
  tokens: Uint32Array;
  /** Element type of the kv sections (the engine's pool dtype). */
  dtype: KvDtype;
  sections: TailSectionRecord[];
  /** The prompt's chain when it covers the unit's full blocks (skips hashing). */
  chain?: PrefixChain;
  /** Client retention hint (ms after last use), already capped by the caller. */
  ttlMs?: number;
}

export type UnitStoreOutcome = 'queued' | 'duplicate' | 'dropped';

/** A unit found by lookupUnit: pass it to loadUnit. */
export interface UnitHit {
  position: number;
  key: string;
  keyBytes: Uint8Array;
  /** The unit's blocks: `hitBlocks` = floor(position / B). */
  blocks: LookupResult;
  /** The tail's stored size (what a load reads besides the blocks); 0 when unknown. */
  tailBytes: number;
}


const PLANE_BATCH = 512;

export function storeUnit(core: TierCore, request: UnitStoreRequest): UnitStoreOutcome {
  const policy = core.policy.current();
  core.assertScope(request, policy);
  const { namespace, tokens, dtype, sections } = request;
  if (!(tokens instanceof Uint32Array) || tokens.length < 1) throw new KvTierConfigError('tokens', 'a unit covers a non-empty Uint32Array of tokens', 'KVT_ERR_KVTIER_BAD_REQUEST');
  if (!KV_DTYPES.includes(dtype)) throw new KvTierConfigError('dtype', `dtype ${dtype} is not one of ${KV_DTYPES.join(', ')}`, 'KVT_ERR_KVTIER_BAD_REQUEST');
  const B = core.blockTokens;
  const p = tokens.length;
  const n = Math.floor(p / B);
  const chain = request.chain !== undefined && request.chain.blockCount >= n && request.chain.blockTokens === B ? request.chain : core.hasher.chain(namespace.keyBytes, tokens, n);
  const keyBytes = core.hasher.unitKeyBytes(chain, tokens, p);
  const key = bytesToHex(keyBytes);
  const units = core.unitCounters;
  const now = core.clock.now();
  if (core.writes.has(key) || core.flights.readable(key) || isLive(core, key, keyBytes, now)) {
    units.duplicate++;
    return 'duplicate';
  }
  const tail: TailToEncode = {
    key: keyBytes,
    blockKey: n > 0 ? chain.keyBytes(n - 1).slice() : new Uint8Array(KEY_BYTES),
    modelFingerprint: namespace.modelFingerprint,
    position: p,
    tokensPerBlock: B,
    tokens: tokens.slice(n * B, p),
    dtype,
    sections,
  };
  // Encoded raw now (bad sections throw here, before anything is queued); readable from `flights` until written.
  const raw = core.tailCodec.encode(tail);
  const codec = policy.codecFor(request.trafficClass);
  const run = async () => {
    try {
      let bytes = raw;
      if (codec !== 'none') {
        await new Promise<void>((resolve) => setImmediate(resolve));
        try {
          bytes = core.tailCodec.encode(tail, codec);
        } catch (error) {
          core.noteError(error, `compressing a tail under ${codec} failed; stored uncompressed`);
        }
      }
      await writeTail(core, key, keyBytes, bytes, n, request, now);
    } finally {
      core.flights.written(key);
    }
  };
  const outcome = core.writes.offer({ key, bytes: raw.byteLength, run });
  if (outcome === 'queued') {
    core.flights.stored(key, core.flights.nextTick(), raw);
    units.queued++;
  } else if (outcome === 'duplicate') units.duplicate++;
  else units.dropped++;
  return outcome;
}

async function writeTail(core: TierCore, key: string, keyBytes: Uint8Array, bytes: Uint8Array, depth: number, request: UnitStoreRequest, usedAt: number): Promise<void> {
  let stored = bytes;
  try {
    if (core.options.seal !== undefined) stored = core.options.seal.seal(bytes, keyBytes, request.namespace.tenantSalt);
    await core.blobStore.put(key, stored);
  } catch (error) {
    core.noteError(error, 'tail write failed; unit not stored');
    return;
  }
  core.unitCounters.written++;
  core.unitCounters.bytesWritten += stored.byteLength;
  core.counters.bytesWritten += stored.byteLength;
  // As a written block (tier-store.ts): the next request on this unit reads it from RAM.
  if (core.hotCache.budgetBytes > 0) {
    try {
      core.hotCache.put(core.tailCodec.decode(bytes));
    } catch (error) {
      core.noteError(error, 'a tail we just encoded does not decode');
    }
  }
  try {
    await core.index.recordWrites([{ keyBytes, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlCapMs: request.ttlMs, kind: 'tail' }], usedAt, core.policy.current());
    core.liveEntries.forget(key);
  } catch (error) {
    core.noteError(error, 'index update after a tail write failed');
  }
  await core.planeLink.recordWrite({ key, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlMs: request.ttlMs, kind: 'tail' }, usedAt);
}

function isLive(core: TierCore, key: string, keyBytes: Uint8Array, now: number): boolean {
  try {
    return core.liveEntries.probe(key, keyBytes, now, core.policy.current()) >= 0;
  } catch (error) {
    core.noteError(error, 'index probe failed');
    return false;
  }
}

/** The longest live unit of `tokens` at a position ≤ maxPosition, or null (see the file comment). */
export async function lookupUnit(core: TierCore, namespace: KvNamespace, tokens: Uint32Array, scope: RequestScope, maxPosition: number, given?: PrefixChain): Promise<UnitHit | null> {
  const blocks = await lookupPrefix(core, namespace, tokens, scope, given);
  const units = core.unitCounters;
  units.lookups++;
  const B = core.blockTokens;
  const h = blocks.hitBlocks;
  const top = Math.min(maxPosition, tokens.length, (h + 1) * B - 1);
  const policy = core.policy.current();
  const now = core.clock.now();
  const { chain } = blocks;
  const scratch = new Uint8Array(4 + KEY_BYTES + 4 + 4 * B);
  const candidates: { p: number; key: string; keyBytes: Uint8Array }[] = [];
  let found: { p: number; key: string; keyBytes: Uint8Array; lastUse: number; sizeBytes?: number } | null = null;
  try {
    for (let p = top; p >= 1; p--) {
      const keyBytes = core.hasher.unitKeyBytes(chain, tokens, p, new Uint8Array(KEY_BYTES), scratch);
      const key = bytesToHex(keyBytes);
      if (core.flights.readable(key)) {
        found = { p, key, keyBytes, lastUse: now };
        break;
      }
      const lastUse = core.liveEntries.probe(key, keyBytes, now, policy);
      if (lastUse >= 0) {
        found = { p, key, keyBytes, lastUse };
        break;
      }
      candidates.push({ p, key, keyBytes });
    }
  } catch (error) {
    core.noteError(error, 'index probe of unit keys failed; treating it as a miss');
    return null;
  }
  // The plane knows units other nodes wrote: ask for the positions above the local hit, longest first.
  for (let i = 0; i < candidates.length; i += PLANE_BATCH) {
    const batch = candidates.slice(i, i + PLANE_BATCH);
    let records: (BlockRecord | null)[];
    try {
      records = await core.planeLink.plane.get(batch.map((c) => c.key));
    } catch (error) {
      core.noteError(error, 'metadata plane get of unit keys failed; using what the node index holds');
      break;
    }
    const at = records.findIndex((r) => r !== null && r.lastUseAt + effectiveTtlMs(r, (c, t) => policy.ttlMs(c, t)) > now);
    if (at >= 0) {
      const c = batch[at];
      const record = records[at]!;
      core.track(
        core.index.adoptRecords([{ keyBytes: c.keyBytes.slice(), sizeBytes: record.sizeBytes, trafficClass: record.trafficClass, tenant: record.tenant, depth: Math.floor(c.p / B), createdAt: record.createdAt, lastUseAt: now, ttlCapMs: record.ttlMs, kind: 'tail' }], policy),
        'index adopt of a unit failed',
      );
      found = { ...c, lastUse: 0, sizeBytes: record.sizeBytes };
      break;
    }
  }
  if (found === null) return null;
  const n = Math.floor(found.p / B);
  if (now - found.lastUse >= (core.options.touchIntervalMs ?? 60_000)) {
    core.track(core.index.touch([found.keyBytes.slice()], now, policy), 'index touch of a unit failed');
    core.liveEntries.renewed(found.key, now);
    core.planeLink.renew([found.key], now, [n]);
  }
  units.hits++;
  const adopted = Math.max(0, n - (h - blocks.adoptedBlocks));
  const tailBytes = found.sizeBytes ?? tailSize(core, found.key, found.keyBytes);
  return { position: found.p, key: found.key, keyBytes: found.keyBytes, blocks: new LookupResult(namespace, tokens, blocks.scope, chain, n, adopted), tailBytes };
}

/** The stored size of a tail found live here: the bytes of its write in flight, or its index record (one LMDB read). */
function tailSize(core: TierCore, key: string, keyBytes: Uint8Array): number {
  const pending = core.flights.bytesOf(key);
  if (pending !== undefined) return pending.byteLength;
  try {
    return core.index.get(keyBytes)?.sizeBytes ?? 0;
  } catch (error) {
    core.noteError(error, 'index read of a tail size failed');
    return 0;
  }
}
