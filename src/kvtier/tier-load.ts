import type { DecodedBlock } from './block-codec.ts';
import { BlockError, errorCodeOf } from './errors.ts';
import type { LoadedBlock, LoadedBlocks, LookupResult } from './kv-tier-types.ts';
import { BlockReadBuffers, releaserOf } from './load-buffers.ts';
import type { BufferLease } from './read-buffer-pool.ts';
import { openStoredForDecode } from './seal/index.ts';
import type { TierCore } from './tier-core.ts';

/** Verification failures that mean the stored file itself is bad (deleted); the others are collisions (kept for their owner). */
const CORRUPT_CODES = new Set<string>([
  'KVT_ERR_BLOCK_TRUNCATED',
  'KVT_ERR_BLOCK_BAD_MAGIC',
  'KVT_ERR_BLOCK_VERSION',
  'KVT_ERR_BLOCK_HEADER_CHECKSUM',
  'KVT_ERR_BLOCK_PAYLOAD_CHECKSUM',
  'KVT_ERR_BLOCK_MALFORMED',
  'KVT_ERR_BLOCK_KEY_MISMATCH',
]);

type BlockSizes = { keyBytes: Uint8Array; sizeBytes: number }[];

/**
 * KvTier.load: reads and verifies the lookup's hits [fromBlock, hitBlocks),
 * up to `readConcurrency` reads in flight in prompt order; the result is
 * exactly the verified contiguous prefix (see KvTier.load).
 */
export async function loadBlocks(core: TierCore, lookup: LookupResult, options: { fromBlock?: number }): Promise<LoadedBlocks> {
  core.counters.loads++;
  const { chain, hitBlocks } = lookup;
  // A caller that holds the first blocks already (a retained sequence) reads only the rest.
  const fromBlock = Math.min(hitBlocks, Math.max(0, Math.floor(options.fromBlock ?? 0)));
  const sizes: BlockSizes = [];
  const concurrency = core.options.readConcurrency ?? 16;
  const results = new Array<LoadedBlock | { failed: string }>(hitBlocks);
  // Sliding window, in order: block i+concurrency starts as soon as any
  // read finishes; nothing past the first failure is started.
  let next = fromBlock;
  let firstFailure = hitBlocks;
  const worker = async () => {
    for (;;) {
      const i = next++;
      if (i >= hitBlocks || i >= firstFailure) return;
      const result = await loadOne(core, lookup, i, sizes);
      results[i] = result;
      if ('failed' in result && i < firstFailure) firstFailure = i;
    }
  };
  await Promise.all(Array.from({ length: Math.min(concurrency, hitBlocks - fromBlock) }, worker));
  const blocks = results.slice(fromBlock, firstFailure) as LoadedBlock[];
  // Blocks read past a failure are not returned: let go of their buffers now.
  for (let i = firstFailure + 1; i < hitBlocks; i++) leaseOf.get(results[i] as LoadedBlock)?.unref();
  let stoppedAt: LoadedBlocks['stoppedAt'];
  if (firstFailure < hitBlocks) {
    stoppedAt = { block: firstFailure, code: (results[firstFailure] as { failed: string }).failed };
    core.counters.loadFailedBlocks += hitBlocks - firstFailure;
  }
  if (sizes.length > 0) core.track(core.index.noteSizes(sizes), 'index size update failed');
  core.counters.loadedBlocks += blocks.length;
  const loaded: LoadedBlocks = { blocks, tokenCount: blocks.length * chain.blockTokens, release: releaserOf(blocks.map((block) => leaseOf.get(block))) };
  if (stoppedAt !== undefined) loaded.stoppedAt = stoppedAt;
  return loaded;
}

async function loadOne(core: TierCore, lookup: LookupResult, i: number, sizes: BlockSizes): Promise<LoadedBlock | { failed: string }> {
  const key = lookup.chain.keyHex(i);
  const cached = core.hotCache.get(key);
  if (cached !== undefined) {
    const problem = verify(cached, lookup, i);
    if (problem === undefined && cached.lease?.released !== true) {
      core.counters.hotCacheHits++;
      return toLoaded(cached, i);
    }
    core.hotCache.delete(key);
  }
  let bytes: Uint8Array | null | undefined = core.flights.bytesOf(key);
  const fromPending = bytes !== undefined;
  const buffers = new BlockReadBuffers(core.readPool);
  // Sealed blocks on the fs store are decrypted as they are read (seal/sealed-read.ts), others after the get.
  const sealedRead = fromPending ? undefined : core.options.seal?.sealedRead(lookup.chain.keyBytes(i), lookup.namespace.tenantSalt);
  try {
    bytes ??= await core.blobStore.get(key, sealedRead === undefined ? buffers.getOptions : { ...buffers.getOptions, fill: sealedRead.fill });
  } catch (error) {
    const code = errorCodeOf(error);
    if (TOO_LARGE_CODES.has(code)) forgetTooLarge(core, key, lookup.chain.keyBytes(i), error);
    else core.noteError(error, 'storage get() failed; the load ends at this block');
    return { failed: code };
  }
  if (bytes === null) {
    // Deleted by another node's GC (or by hand): forget it here too.
    core.noteError(new BlockError('KVT_ERR_BLOCK_MISSING', `block ${key} is in the index but not on storage`), 'block vanished from storage');
    core.liveEntries.forget(key);
    core.track(core.index.remove([lookup.chain.keyBytes(i).slice()]), 'index remove failed');
    core.track(core.planeLink.forget([key]), 'plane remove of a vanished block failed');
    return { failed: 'KVT_ERR_BLOCK_MISSING' };
  }
  if (!fromPending) {
    core.counters.bytesRead += bytes.byteLength;
    buffers.own(bytes);
  }
  // Encryption at rest (seal/): a blob that does not open is a miss and is kept (the keyring may be what is wrong).
  let plain = bytes;
  let authenticatedBy: 'aes-256-gcm' | undefined;
  if (!fromPending) {
    try {
      // A sealed block whose tag verified skips the payload checksum (block-codec.ts's checksum rule).
      ({ plain, authenticatedBy } = sealedRead?.result(bytes) ?? (await openStoredForDecode(core.options.seal, bytes, lookup.chain.keyBytes(i), lookup.namespace.tenantSalt)));
      // Decrypted in place, or into a fresh buffer of its own (an open thread's).
      buffers.own(plain, plain.buffer !== bytes.buffer);
    } catch (error) {
      buffers.discard();
      core.noteError(error, 'stored block did not open (encryption at rest); treated as a miss');
      return { failed: errorCodeOf(error) };
    }
  }
  let block: DecodedBlock;
  try {
    block = core.codec.decode(plain, { allocatePayload: buffers.allocate, authenticatedBy });
  } catch (error) {
    buffers.discard();
    discardCorrupt(core, key, lookup.chain.keyBytes(i), error);
    return { failed: errorCodeOf(error) };
  }
  buffers.attach(block);
  const problem = verify(block, lookup, i);
  if (problem !== undefined) {
    block.lease?.discardUnheld();
    if (CORRUPT_CODES.has(problem.code)) discardCorrupt(core, key, lookup.chain.keyBytes(i), problem);
    else core.noteError(problem, 'block does not belong to this prefix (hash collision); treated as a miss');
    return { failed: problem.code };
  }
  // Only adopted blocks lack a size in the index: a hit on any other costs no LMDB write.
  if (!fromPending && i >= lookup.hitBlocks - lookup.adoptedBlocks) sizes.push({ keyBytes: lookup.chain.keyBytes(i).slice(), sizeBytes: bytes.byteLength });
  core.hotCache.put(block);
  return toLoaded(block, i);
}

/** Checks a decoded block against the prefix it is meant to continue. */
function verify(block: DecodedBlock, lookup: LookupResult, i: number): BlockError | undefined {
  const { chain, tokens, namespace } = lookup;
  if (block.key !== chain.keyHex(i)) return new BlockError('KVT_ERR_BLOCK_KEY_MISMATCH', `file for ${chain.keyHex(i)} holds block ${block.key}`);
  if (block.parentKey !== chain.parentKeyHex(i)) {
    return new BlockError('KVT_ERR_BLOCK_PARENT_MISMATCH', `block ${block.key} continues ${block.parentKey}, not ${chain.parentKeyHex(i)}`);
  }
  if (block.modelFingerprint !== namespace.modelFingerprint) {
    return new BlockError('KVT_ERR_BLOCK_FINGERPRINT_MISMATCH', `block ${block.key} was made by model ${block.modelFingerprint}`);
  }
  const B = chain.blockTokens;
  if (block.tokens.length !== B || block.layout.tokensPerBlock !== B) {
    return new BlockError('KVT_ERR_BLOCK_LAYOUT_MISMATCH', `block ${block.key} holds ${block.tokens.length} tokens, expected ${B}`);
  }
  const offset = i * B;
  for (let t = 0; t < B; t++) {
    if (block.tokens[t] !== tokens[offset + t]) return new BlockError('KVT_ERR_BLOCK_TOKEN_MISMATCH', `block ${block.key} holds other tokens (hash collision)`);
  }
  return undefined;
}

/** A blob past the read bound: no load of any node can ever use it. */
const TOO_LARGE_CODES = new Set<string>(['KVT_ERR_STORAGE_TOO_LARGE', 'KVT_ERR_BLOCK_TOO_LARGE']);

/**
 * Refused as too large: the block leaves this node's index and the plane at
 * once, so the next lookup misses it instead of hitting and failing again.
 * The blob itself stays, an orphan (plane-rebuild.ts gives such a blob no
 * record either): GC's orphan sweep deletes it after the grace period, as it
 * does any blob it cannot judge as a block. (While the plane is untrusted,
 * lookups probe storage for blocks no record names and may adopt the blob
 * again; the next load refuses it again, from its size, and drops it again.)
 */
function forgetTooLarge(core: TierCore, key: string, keyBytes: Uint8Array, error: unknown): void {
  core.noteError(error, 'stored block is past the read bound; dropped from the index (its blob is an orphan now)');
  core.hotCache.delete(key);
  core.liveEntries.forget(key);
  const ownKey = keyBytes.slice();
  core.track(
    (async () => {
      await core.index.remove([ownKey]);
      await core.planeLink.forget([key]);
    })(),
    'dropping a too-large block from the index failed',
  );
}

function discardCorrupt(core: TierCore, key: string, keyBytes: Uint8Array, error: unknown): void {
  core.noteError(error, 'corrupt block deleted; treated as a miss');
  core.hotCache.delete(key);
  core.liveEntries.forget(key);
  const ownKey = keyBytes.slice();
  core.track(
    (async () => {
      await core.blobStore.delete([key]);
      await core.index.remove([ownKey]);
      await core.planeLink.forget([key]);
    })(),
    'deleting a corrupt block failed',
  );
}

/** The lease a loaded block holds (one ref per LoadedBlock, let go by LoadedBlocks.release). */
const leaseOf = new WeakMap<LoadedBlock, BufferLease>();

function toLoaded(block: DecodedBlock, index: number): LoadedBlock {
  const loaded = { key: block.key, parentKey: block.parentKey, index, tokens: block.tokens, payload: block.payload, layout: block.layout };
  if (block.lease !== undefined) {
    block.lease.ref();
    leaseOf.set(loaded, block.lease);
  }
  return loaded;
}
