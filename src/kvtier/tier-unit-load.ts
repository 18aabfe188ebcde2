import type { LoadedBlock, LoadedBlocks } from './kv-tier-types.ts';
import { BlockError } from './errors.ts';
import { KEY_BYTES } from './prefix-hasher.ts';
import { MAX_BLOCK_READ_BYTES } from './read-buffer-pool.ts';
import { openStoredForDecode } from './seal/index.ts';
import type { DecodedTail } from './tail-codec.ts';
import type { TierCore } from './tier-core.ts';
import { loadBlocks } from './tier-load.ts';
import type { UnitHit } from './tier-units.ts';

/**
 * Loading a prefix unit (issue #26; store and lookup in tier-units.ts): its
 * blocks as any load reads them (tier-load.ts: hot tier, bytes in flight,
 * storage), then its tail, served as a block is: from the hot RAM tier
 * (hot-block-cache.ts, one budget with the blocks; a tail enters it when it is
 * written or read), the bytes of its write in flight, or storage, where the
 * loads that want one tail at once share one read (BlockFlights.readOnce).
 *
 * A unit whose blocks or tail fail to read or verify is a miss (full
 * prefill), never a wrong state: load checks each block (tier-load.ts) and
 * the tail's key, block key, fingerprint, position and tokens.
 */

export interface LoadedUnit {
  position: number;
  blocks: LoadedBlock[];
  tail: DecodedTail;
  /** Hands the blocks' read buffers back once they are imported. */
  release(): void;
}

/** Reads and verifies the unit's blocks and tail; null (a miss, counted) when any of them fails. */
export async function loadUnit(core: TierCore, hit: UnitHit): Promise<LoadedUnit | null> {
  const units = core.unitCounters;
  const n = hit.blocks.hitBlocks;
  const none: LoadedBlocks = { blocks: [], tokenCount: 0, release: () => undefined };
  const blocks = n > 0 ? await loadBlocks(core, hit.blocks, {}) : none;
  if (blocks.blocks.length < n) {
    blocks.release();
    units.loadFailed++;
    return null;
  }
  const tail = await readTail(core, hit);
  if (tail === null) {
    blocks.release();
    units.loadFailed++;
    return null;
  }
  units.loaded++;
  units.hitTokens += hit.position;
  return { position: hit.position, blocks: blocks.blocks, tail, release: () => blocks.release() };
}

/**
 * The unit's tail, verified against the hit: from the hot tier, the bytes of
 * its write in flight, or storage — one read for all the loads that want it at
 * once (flights.readOnce); a tail read from storage stays in the hot tier.
 */
async function readTail(core: TierCore, hit: UnitHit): Promise<DecodedTail | null> {
  const { key } = hit;
  const hot = core.hotCache.getTail(key);
  if (hot !== undefined) {
    if (verifyTail(hot, hit) === undefined) {
      core.unitCounters.hotHits++;
      return hot;
    }
    core.hotCache.delete(key);
  }
  const pending = core.flights.bytesOf(key);
  const tail = pending !== undefined ? decodeTail(core, hit, pending, undefined) : await core.flights.readOnce(key, () => readStoredTail(core, hit));
  if (tail === null) return null;
  const problem = verifyTail(tail, hit);
  if (problem !== undefined) {
    core.noteError(problem, 'tail does not belong to this prefix; the unit is a miss');
    return null;
  }
  return tail;
}

async function readStoredTail(core: TierCore, hit: UnitHit): Promise<DecodedTail | null> {
  const { key, keyBytes } = hit;
  let stored: Uint8Array | null;
  try {
    stored = await core.blobStore.get(key, { maxBytes: MAX_BLOCK_READ_BYTES });
  } catch (error) {
    core.noteError(error, 'storage get() of a tail failed; the unit is a miss');
    return null;
  }
  if (stored === null) {
    core.noteError(new BlockError('KVT_ERR_BLOCK_MISSING', `tail ${key} is in the index but not on storage`), 'tail vanished from storage');
    forget(core, key, keyBytes, false);
    return null;
  }
  core.unitCounters.tailReads++;
  core.counters.bytesRead += stored.byteLength;
  let plain: Uint8Array;
  let authenticatedBy: 'aes-256-gcm' | undefined;
  try {
    ({ plain, authenticatedBy } = await openStoredForDecode(core.options.seal, stored, keyBytes, hit.blocks.namespace.tenantSalt));
  } catch (error) {
    core.noteError(error, 'stored tail did not open (encryption at rest); the unit is a miss');
    return null;
  }
  const tail = decodeTail(core, hit, plain, authenticatedBy);
  // Kept only if it is this unit's: a collision's tail stays on storage for its owner, out of RAM.
  if (tail !== null && verifyTail(tail, hit) === undefined) core.hotCache.put(tail);
  return tail;
}

function decodeTail(core: TierCore, hit: UnitHit, plain: Uint8Array, authenticatedBy: 'aes-256-gcm' | undefined): DecodedTail | null {
  try {
    return core.tailCodec.decode(plain, { authenticatedBy });
  } catch (error) {
    core.noteError(error, 'corrupt tail deleted; the unit is a miss');
    forget(core, hit.key, hit.keyBytes, true);
    return null;
  }
}

function verifyTail(tail: DecodedTail, hit: UnitHit): BlockError | undefined {
  const { chain, tokens, namespace } = hit.blocks;
  const p = hit.position;
  const n = hit.blocks.hitBlocks;
  const B = chain.blockTokens;
  if (tail.key !== hit.key) return new BlockError('KVT_ERR_BLOCK_KEY_MISMATCH', `tail file for ${hit.key} holds unit ${tail.key}`);
  if (tail.modelFingerprint !== namespace.modelFingerprint) return new BlockError('KVT_ERR_BLOCK_FINGERPRINT_MISMATCH', `tail ${tail.key} was made by model ${tail.modelFingerprint}`);
  if (tail.position !== p || tail.tokensPerBlock !== B || tail.blocks !== n) return new BlockError('KVT_ERR_BLOCK_LAYOUT_MISMATCH', `tail ${tail.key} is a unit at ${tail.position} of ${tail.tokensPerBlock}-token blocks, ${p} of ${B} expected`);
  const blockKey = n > 0 ? chain.keyHex(n - 1) : '0'.repeat(2 * KEY_BYTES);
  if (tail.blockKey !== blockKey) return new BlockError('KVT_ERR_BLOCK_PARENT_MISMATCH', `tail ${tail.key} needs block ${tail.blockKey}, not ${blockKey}`);
  for (let t = 0; t < tail.tokens.length; t++) {
    if (tail.tokens[t] !== tokens[n * B + t]) return new BlockError('KVT_ERR_BLOCK_TOKEN_MISMATCH', `tail ${tail.key} holds other tokens (hash collision)`);
  }
  return undefined;
}

/** A tail found missing or corrupt: its records are wrong for every node (and a corrupt blob goes too). */
function forget(core: TierCore, key: string, keyBytes: Uint8Array, deleteBlob: boolean): void {
  core.hotCache.delete(key);
  core.liveEntries.forget(key);
  const own = keyBytes.slice();
  core.track(
    (async () => {
      if (deleteBlob) await core.blobStore.delete([key]);
      await core.index.remove([own]);
      await core.planeLink.forget([key]);
    })(),
    'dropping a bad tail failed',
  );
}

