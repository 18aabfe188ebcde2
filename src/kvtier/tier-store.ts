import type { BlockCodecName } from './codecs/kv-codecs.ts';
import { KvTierConfigError } from './errors.ts';
import { assertValidLayout, payloadBytesFor } from './kv-layout.ts';
import type { StoreReceipt, StoreRequest } from './kv-tier-types.ts';
import type { RetentionPolicy } from './retention-policy.ts';
import type { TierCore } from './tier-core.ts';

/**
 * KvTier.store: checks the request, then queues each new full block on the
 * write-behind queue and returns at once (see KvTier.store). A queued block
 * is readable from `core.flights` until its index entry is committed;
 * every block handed over is marked there with this call's store tick.
 */
export function queueStore(core: TierCore, request: StoreRequest): StoreReceipt {
  const policy = core.policy.current();
  core.assertScope(request, policy);
  const { namespace, tokens, layout } = request;
  const { blockTokens, counters } = core;
  const storeCodec = policy.codecFor(request.trafficClass);
  try {
    assertValidLayout(layout);
  } catch (error) {
    throw new KvTierConfigError('layout', (error as Error).message, 'KVT_ERR_KVTIER_BAD_REQUEST');
  }
  if (layout.tokensPerBlock !== blockTokens) {
    throw new KvTierConfigError('layout', `layout.tokensPerBlock is ${layout.tokensPerBlock} but this tier cuts blocks of ${blockTokens} tokens`, 'KVT_ERR_KVTIER_BAD_REQUEST');
  }
  if (!(tokens instanceof Uint32Array)) throw new KvTierConfigError('tokens', 'tokens must be a Uint32Array', 'KVT_ERR_KVTIER_BAD_REQUEST');
  const fullBlocks = Math.floor(tokens.length / blockTokens);
  const fromBlock = request.fromBlock ?? 0;
  const payloads = request.payloads;
  const toBlock = typeof payloads === 'function' ? Math.min(request.toBlock ?? fullBlocks, fullBlocks) : fromBlock + payloads.length;
  if (!Number.isInteger(fromBlock) || fromBlock < 0 || toBlock > fullBlocks || toBlock < fromBlock) {
    throw new KvTierConfigError(
      'fromBlock',
      `blocks ${fromBlock}..${toBlock} are not within the ${fullBlocks} full blocks of ${tokens.length} tokens (only full blocks are stored)`,
      'KVT_ERR_KVTIER_BAD_REQUEST',
    );
  }
  const payloadBytes = payloadBytesFor(layout, blockTokens);
  if (typeof payloads !== 'function') {
    payloads.forEach((payload, i) => {
      if (!(payload instanceof Uint8Array) || payload.byteLength !== payloadBytes) {
        throw new KvTierConfigError(
          'payloads',
          `payload ${i} (block ${fromBlock + i}) is ${payload?.byteLength} bytes; layout needs ${payloadBytes} per block (per layer K then V, [kvHead][token][headDim])`,
          'KVT_ERR_KVTIER_BAD_REQUEST',
        );
      }
    });
  }
  const chain =
    request.chain !== undefined && request.chain.blockCount >= toBlock && request.chain.blockTokens === blockTokens
      ? request.chain
      : core.hasher.chain(namespace.keyBytes, tokens, toBlock);
  const receipt: StoreReceipt = { queued: 0, duplicate: 0, dropped: 0 };
  const now = core.clock.now();
  const estimate = payloadBytes + 1024 + namespace.modelFingerprint.length;
  const { flights } = core;
  const tick = flights.nextTick();
  // The TTL an in-flight block expires under for a lookup (flights): the policy's for this scope, capped by the request's.
  const ttlMs = Math.min(policy.ttlMs(request.trafficClass, request.tenant), request.ttlMs !== undefined && request.ttlMs > 0 ? request.ttlMs : Number.POSITIVE_INFINITY);
  for (let i = fromBlock; i < toBlock; i++) {
    const key = chain.keyHex(i);
    // Handed over, whatever becomes of it: a lookup that started before this looks again (single flight).
    flights.stored(key, tick);
    if (core.writes.has(key)) {
      // Stored again while its write is in flight: a use (the write records it).
      flights.renewWhileWriting(key, now);
      receipt.duplicate++;
      continue;
    }
    if (isStoredLive(core, key, chain.keyBytes(i), now, policy)) {
      receipt.duplicate++;
      continue;
    }
    if (!core.writes.fits(estimate)) {
      receipt.dropped++;
      counters.writeBehind.droppedBlocks++;
      counters.writeBehind.droppedBytes += payloadBytes;
      continue;
    }
    const ownTokens = tokens.subarray(i * blockTokens, (i + 1) * blockTokens);
    let run: (putLanded: () => void) => Promise<void>;
    let encoded: Uint8Array | undefined;
    if (typeof payloads === 'function') {
      // The callback form reads the caller's tokens later: keep our own copy of this block's.
      const tokensCopy = ownTokens.slice();
      const keyBytes = chain.keyBytes(i).slice();
      const parentKeyBytes = chain.parentKeyBytes(i).slice();
      run = async (putLanded) => {
        let bytes: Uint8Array;
        try {
          const payload = await payloads(i);
          bytes = core.codec.encode({ key: keyBytes, parentKey: parentKeyBytes, modelFingerprint: namespace.modelFingerprint, tokens: tokensCopy, layout, payload }, storeCodec);
        } catch (error) {
          core.noteError(error, `payload callback for block ${i} failed; block not stored`);
          return;
        }
        await writeBlock(core, key, keyBytes, bytes, i, request, now, putLanded);
      };
    } else {
      const bytes = core.codec.encode({
        key: chain.keyBytes(i),
        parentKey: chain.parentKeyBytes(i),
        modelFingerprint: namespace.modelFingerprint,
        tokens: ownTokens,
        layout,
        payload: payloads[i - fromBlock],
      }, 'none', core.encodePool.allocate);
      encoded = bytes;
      const keyBytes = chain.keyBytes(i).slice();
      // Under codec none the job is the write alone (no async step in between: one promise less per block).
      run =
        storeCodec === 'none'
          ? (putLanded) => writeBlock(core, key, keyBytes, bytes, i, request, now, putLanded)
          : async (putLanded) => writeBlock(core, key, keyBytes, await compressForStore(core, bytes, storeCodec), i, request, now, putLanded);
    }
    const outcome = core.writes.offer({ key, bytes: estimate, run });
    if (outcome === 'queued') {
      if (encoded !== undefined) flights.stored(key, tick, encoded, { at: now, ttlMs });
      receipt.queued++;
      counters.writeBehind.queuedBlocks++;
    } else if (outcome === 'duplicate') receipt.duplicate++;
    else {
      receipt.dropped++;
      counters.writeBehind.droppedBlocks++;
      counters.writeBehind.droppedBytes += payloadBytes;
    }
  }
  counters.writeBehind.duplicateBlocks += receipt.duplicate;
  return receipt;
}

/**
 * `usedAt`: the time of the request that stored the block (its `store` call),
 * recorded as the block's last use in the index and the plane; a write that
 * lands later does not lengthen the block's life (a replay with an injected
 * clock gets exactly the definition's expiry).
 */
async function writeBlock(core: TierCore, key: string, keyBytes: Uint8Array, bytes: Uint8Array, depth: number, request: StoreRequest, usedAt: number, putLanded: () => void): Promise<void> {
  // One async step per block (the put, then the records): the write and its records were two nested async functions, a promise more per block.
  let recordedAt = -1;
  // Whether `bytes` go back to the encode pool at the end (its ownership rule: encode-buffer-pool.ts).
  let reusable = false;
  try {
    const { counters, options } = core;
    let stored = bytes;
    let put = true;
    try {
      if (options.seal !== undefined) stored = options.seal.seal(bytes, keyBytes, request.namespace.tenantSalt);
      await core.blobStore.put(key, stored);
    } catch (error) {
      core.noteError(error, 'block write failed; block not stored');
      put = false;
    }
    // The next block's put may start while this one is recorded (write-behind-queue.ts); this job still holds its key.
    putLanded();
    if (put) {
      counters.bytesWritten += stored.byteLength;
      counters.blocksWritten++;
      const at = Math.max(usedAt, core.flights.lastUseWhileWriting(key));
      await core.writeRecords.record({
        key,
        index: { keyBytes, key, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlCapMs: request.ttlMs, at },
        plane: { key, sizeBytes: stored.byteLength, trafficClass: request.trafficClass, tenant: request.tenant, depth, ttlMs: request.ttlMs, at },
      });
      // The hot tier keeps views into the bytes; otherwise nobody but a load from the flight can have seen them.
      reusable = core.hotCache.budgetBytes === 0;
      if (!reusable) {
        try {
          core.hotCache.put(core.codec.decode(bytes));
        } catch (error) {
          core.noteError(error, 'a block we just encoded does not decode');
        }
      }
      // The last use recorded for the block (its store call, or a later use while it was being written).
      recordedAt = at;
    }
  } finally {
    // A hit or store while the records were being written renewed only the flight: carry it over before the flight
    // goes. The flight keeps answering lookups until the renewal is committed: a lookup in between read the index's
    // older last use, a false miss under a short TTL (seen once requests ran between commits; bench/RESULTS.md).
    let lastUse = core.flights.lastUseWhileWriting(key);
    while (recordedAt >= 0 && lastUse > recordedAt) {
      try {
        await core.index.touch([keyBytes], lastUse, core.policy.current());
      } catch (error) {
        core.noteError(error, 'index touch failed');
        break;
      }
      core.liveEntries.renewed(key, lastUse);
      core.planeLink.renew([key], lastUse, [depth]);
      recordedAt = lastUse;
      // A use that came while the touch was committed renewed the flight again.
      lastUse = core.flights.lastUseWhileWriting(key);
    }
    // Only now that the index knows it (or the write failed).
    const lent = core.flights.written(key);
    if (reusable && !lent) core.encodePool.give(bytes);
  }
}

/**
 * Codec hook (codecs/): the block re-encoded under the policy's codec, in
 * the write-behind job after a setImmediate yield (the queue starts a job
 * inside `offer`, so without it the request would pay for compression).
 * Until the write lands, `flights` serves the raw block. A failure stores it uncompressed.
 */
async function compressForStore(core: TierCore, bytes: Uint8Array, codec: BlockCodecName): Promise<Uint8Array> {
  if (codec === 'none') return bytes;
  await new Promise<void>((resolve) => setImmediate(resolve));
  try {
    return core.codec.recode(bytes, codec);
  } catch (error) {
    core.noteError(error, `compressing a block under ${codec} failed; stored uncompressed`);
    return bytes;
  }
}

function isStoredLive(core: TierCore, key: string, keyBytes: Uint8Array, now: number, policy: RetentionPolicy): boolean {
  try {
    return core.liveEntries.probe(key, keyBytes, now, policy) >= 0;
  } catch (error) {
    core.noteError(error, 'index probe failed');
    return false;
  }
}
