/**
 * The fetch phase: find a request's longest cached prefix — a retained
 * sequence of its tenant, or blocks from the tier, whichever covers more —
 * then either wait for an earlier request computing the next blocks (single
 * flight) or put the prefix into the request's KV and start its prefill.
 * Storage faults become a miss (full prefill) and are reported.
 */
import { TokenIds } from '../../inference-core/index.ts';

import { describeError, type SchedulerContext } from './scheduler-context.ts';
import type { RequestSequence } from './sequence.ts';

/** Under fetch-or-recompute, every this-many "recompute" decisions one loads anyway, so the read rate stays measured. */
const PROBE_EVERY = 16;
const RECOMPUTE_MARGIN = 2;

export class FetchPhase {
  private recomputeDecisions = 0;

  constructor(private readonly ctx: SchedulerContext) {}

  /** Lookup and load in the background; the loop sees the result between steps. */
  start(seq: RequestSequence): void {
    seq.phase = 'fetching';
    this.ctx.computing.lookupStarted(seq);
    const { pendingFetches } = this.ctx;
    const pending = this.lookupAndLoad(seq)
      .then(() => this.fetched(seq))
      .catch((error: unknown) => this.ctx.fail(seq, error))
      .finally(() => {
        pendingFetches.delete(pending);
        this.ctx.kick();
      });
    pendingFetches.add(pending);
  }

  /** Validates the job and fills `loaded` / `donor` / `reusable` of `seq`. */
  private async lookupAndLoad(seq: RequestSequence): Promise<void> {
    const { engine, blockTokens } = this.ctx.options;
    const { tokens, sampling } = seq.job;
    if (tokens.length === 0) throw Object.assign(new Error('the prompt has no tokens'), { code: 'KVT_ERR_REQUEST_EMPTY_PROMPT' });
    if (tokens.length + sampling.maxTokens > engine.contextLength) {
      throw Object.assign(new Error(`prompt (${tokens.length} tokens) + max_tokens (${sampling.maxTokens}) exceeds the context length ${engine.contextLength}`), {
        code: 'KVT_ERR_REQUEST_CONTEXT_OVERFLOW',
      });
    }
    this.keyPrompt(seq);
    const { retained } = this.ctx;
    // At least one token must be prefilled to get the logits of the next one.
    const taken = retained.take(seq.tenantSalt, tokens, tokens.length - 1);
    // A retained sequence sharing less than a block (a BOS, a template header) is worth more kept for its own conversation.
    const donor = taken && taken.reusable >= blockTokens ? taken : null;
    if (taken && !donor) retained.put(taken.entry);
    const heldBlocks = donor ? Math.floor(donor.reusable / blockTokens) : 0;
    let fromTier: Uint8Array[]; // blocks [heldBlocks, …)
    try {
      fromTier = await this.lookupTier(seq, donor?.reusable ?? 0, heldBlocks);
    } catch (error) {
      if (donor) retained.put(donor.entry);
      throw error;
    }
    seq.donor = donor?.entry ?? null;
    if (!donor) {
      seq.loaded = fromTier;
      seq.reusable = 0;
    } else if ((heldBlocks + fromTier.length) * blockTokens <= donor.reusable) {
      seq.loaded = [];
      seq.reusable = donor.reusable;
    } else {
      // The tier holds blocks past the retained sequence (another worker stored them, e.g. a prefill/decode
      // split's prefill half): continue the sequence from its last whole block with those.
      seq.loaded = fromTier;
      seq.reusable = heldBlocks * blockTokens;
    }
  }

  /**
   * Once per request (a deferred one fetches again): its namespace and the
   * key chain of its prompt, which lookup, single flight and store share;
   * then it claims the blocks it will compute. Synchronous from `start`, so
   * claims follow admission order.
   */
  private keyPrompt(seq: RequestSequence): void {
    const { cache, engine, blockTokens, onStorageError } = this.ctx.options;
    if (!cache || seq.namespace !== null) return;
    seq.namespace = cache.namespace(engine.fingerprint, seq.tenantSalt);
    try {
      seq.keys = cache.prefixKeys(seq.namespace, seq.job.tokens);
    } catch (error) {
      // Unkeyed: no single flight for it, and lookup and store hash for themselves (and report the same fault).
      onStorageError?.('lookup', error);
      return;
    }
    this.ctx.computing.claim(seq, blockTokens);
  }

  /**
   * Tier blocks [fromBlock, …) of the prompt's prefix, unless `reusable`
   * tokens held in the pool already cover every block the tier could have.
   */
  private async lookupTier(seq: RequestSequence, reusable: number, fromBlock: number): Promise<Uint8Array[]> {
    const { cache, blockTokens, fetchPolicy, onStorageError } = this.ctx.options;
    const { now } = this.ctx;
    const { tokens } = seq.job;
    const maxCachedBlocks = Math.floor((tokens.length - 1) / blockTokens);
    if (!cache) return [];
    if (reusable >= maxCachedBlocks * blockTokens) return [];
    try {
      const lookupStart = now();
      const hit = await cache.lookup(seq.namespace, tokens, { tenant: seq.job.tenant, trafficClass: seq.job.trafficClass }, maxCachedBlocks, seq.keys ?? undefined);
      seq.lookupMs += now() - lookupStart;
      if (hit.blocks <= fromBlock || !this.shouldLoad(hit.blocks - fromBlock, seq)) return [];
      const loadStart = now();
      const loaded = await cache.load(hit, maxCachedBlocks, fromBlock);
      seq.releaseLoaded = loaded.release ?? null;
      const loadMs = now() - loadStart;
      seq.loadMs += loadMs;
      fetchPolicy?.observeLoad(loaded.payloads.length * cache.blockBytes, loadMs);
      return loaded.payloads;
    } catch (error) {
      seq.storageError = describeError(error);
      onStorageError?.('lookup', error);
      return [];
    }
  }

  private shouldLoad(blocks: number, seq: RequestSequence): boolean {
    const { fetchPolicy: policy, cache, blockTokens } = this.ctx.options;
    if (!policy) return true;
    const decision = policy.decide(blocks, cache!.blockBytes, blockTokens);
    // Recompute only on a clear margin: both rates are noisy, and a load also spares the pool's compute for other sequences.
    if (decision.loadBlocks > 0 || decision.predictedComputeMs * RECOMPUTE_MARGIN >= decision.predictedReadMs) return true;
    if (++this.recomputeDecisions % PROBE_EVERY === 0) return true;
    seq.recomputedHitTokens = blocks * blockTokens;
    return false;
  }

  /** The lookup returned: end a cancelled request, defer behind a blocker, or import the prefix and prefill. */
  private fetched(seq: RequestSequence): void {
    const { ctx } = this;
    const { blockTokens, engine } = ctx.options;
    const donor = seq.donor;
    seq.donor = null;
    if (seq.cancelled || ctx.closed) {
      if (donor) ctx.retained.put(donor);
      seq.dropLoaded();
      return ctx.finish(seq, 'cancelled');
    }
    const cachedTokens = (donor ? seq.reusable : 0) + seq.loaded.length * blockTokens;
    const blocker = ctx.computing.blockerOf(seq, Math.floor(cachedTokens / blockTokens), blockTokens);
    if (blocker === 'look-again') {
      // Another request stored the next block while this lookup was in flight: it is in the tier now.
      if (donor) ctx.retained.put(donor);
      seq.dropLoaded();
      seq.lookedAgain = true;
      return this.start(seq);
    }
    if (blocker) {
      if (donor) ctx.retained.put(donor);
      seq.dropLoaded();
      seq.phase = 'deferred';
      seq.waitFor = blocker.owner;
      seq.waitBlocks = blocker.blocks;
      return;
    }
    const payloads = seq.loaded;
    const imported = payloads.length;
    try {
      if (donor) seq.adopt(donor, seq.reusable);
      else seq.kv = engine.createSequence();
      if (payloads.length > 0) seq.kv!.importBlocks(payloads);
    } catch (error) {
      return ctx.fail(seq, error);
    } finally {
      // The engine copied them into its pages: their read buffers go back to the tier's pool.
      seq.dropLoaded();
    }
    seq.cachedTokens = cachedTokens;
    // Room for the whole prompt and reply: the KV's mirror grows in place.
    seq.fedTokens = new TokenIds(seq.job.tokens.length + seq.job.sampling.maxTokens);
    seq.fedTokens.append(seq.job.tokens.subarray(0, cachedTokens));
    // Blocks that came from the tier are stored; a retained sequence's own are stored up to what it handed off.
    seq.storedBlocks = donor && imported === 0 ? Math.min(donor.storedBlocks, Math.floor(seq.reusable / blockTokens)) : cachedTokens / blockTokens;
    seq.prefillStartedAt = ctx.now();
    seq.phase = 'prefill';
    if (seq.fedTokens.length >= seq.promptTarget) ctx.promptDone(seq, null); // prefillOnly with everything cached
  }
}
