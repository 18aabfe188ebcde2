/**
 * The fetch of one request, as plain functions over its sequence: find its
 * longest cached prefix — a retained sequence of its tenant, or blocks from
 * the tier, whichever covers more — and load it into `seq.fetched`. I/O
 * only: what happens next (defer, adopt the prefix and prefill, end) is
 * decided by postprocess.ts when the loop sees the `fetched` event. Storage
 * faults become a miss (full prefill) and are reported.
 */
import type { FetchOrRecompute } from '../cluster/index.ts';
import { describeError, KvtError } from '../errors.ts';
import type { CacheTier, EngineModel } from './ports.ts';
import { retain } from './postprocess.ts';
import type { RetainedSequences } from './retained-sequences.ts';
import type { RequestSequence } from './sequence.ts';
import { fetchUnit, type UnitPolicy } from './units.ts';

/** Under fetch-or-recompute, every this-many "recompute" decisions one loads anyway, so the read rate stays measured. */
const PROBE_EVERY = 16;
const RECOMPUTE_MARGIN = 2;

export interface FetchDeps {
  engine: EngineModel;
  cache: CacheTier | null;
  blockTokens: number;
  retained: RetainedSequences;
  fetchPolicy?: FetchOrRecompute;
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  now: () => number;
  /** "Recompute" decisions so far (for the probe). */
  recomputeDecisions: { count: number };
  /** Unit mode (a model whose state is not its blocks): units.ts fetches instead. */
  units?: UnitPolicy | null;
}

/**
 * The spec's limits were checked where it was built (src/serve/build-spec.ts); a job that breaks them
 * anyway (a client of another model's API, a bug) fails here rather than in the engine.
 */
export function assertSpecFits(seq: RequestSequence, contextLength: number): void {
  const { tokens, sampling } = seq.spec;
  if (tokens.length === 0) throw new KvtError('KVT_ERR_REQUEST_EMPTY_PROMPT', 'the prompt has no tokens');
  if (tokens.length + sampling.maxTokens > contextLength) {
    throw new KvtError('KVT_ERR_REQUEST_CONTEXT_OVERFLOW', `prompt (${tokens.length} tokens) + max_tokens (${sampling.maxTokens}) exceeds the context length ${contextLength}`);
  }
}

/**
 * Once per request (a deferred one fetches again): its namespace and the
 * key chain of its prompt, which lookup, single flight and store share.
 * False when it could not be keyed (it then claims nothing).
 */
export function keyPrompt(seq: RequestSequence, deps: FetchDeps): boolean {
  const { cache, engine, onStorageError } = deps;
  if (!cache || seq.prefix !== null) return false;
  const namespace = cache.namespace(engine.fingerprint, seq.tenantSalt);
  try {
    seq.prefix = { namespace, keys: cache.prefixKeys(namespace, seq.spec.tokens) };
  } catch (error) {
    // Unkeyed: no single flight for it, and lookup and store hash for themselves (and report the same fault).
    seq.prefix = { namespace, keys: null };
    onStorageError?.('lookup', error);
    return false;
  }
  return true;
}

/** Fills `seq.fetched`: the retained donor and/or the tier's blocks to import. */
export async function fetchPrefix(seq: RequestSequence, deps: FetchDeps): Promise<void> {
  if (deps.units) return fetchUnit(seq, deps, deps.units);
  const { blockTokens, retained } = deps;
  const { tokens } = seq.spec;
  // At least one token must be prefilled to get the logits of the next one.
  const taken = retained.take(seq.tenantSalt, tokens, tokens.length - 1);
  // A retained sequence sharing less than a block (a BOS, a template header) is worth more kept for its own conversation.
  const donor = taken && taken.reusable >= blockTokens ? taken : null;
  if (taken && !donor) retain(retained, taken.entry);
  const heldBlocks = donor ? Math.floor(donor.reusable / blockTokens) : 0;
  let fromTier: { payloads: Uint8Array[]; release: (() => void) | null }; // blocks [heldBlocks, …)
  try {
    fromTier = await lookupTier(seq, heldBlocks, deps);
  } catch (error) {
    if (donor) retain(retained, donor.entry);
    throw error;
  }
  const fetched = { loaded: fromTier.payloads, release: fromTier.release, donor: donor?.entry ?? null, reusable: 0 };
  if (donor && (heldBlocks + fromTier.payloads.length) * blockTokens <= donor.reusable) {
    fetched.loaded = [];
    fetched.reusable = donor.reusable;
  } else if (donor) {
    // The tier holds blocks past the retained sequence (another worker stored them, e.g. a prefill/decode
    // split's prefill half): continue the sequence from its last whole block with those.
    fetched.reusable = heldBlocks * blockTokens;
  }
  seq.fetched = fetched;
  // Unused tier buffers of a donor-only fetch go back at once.
  if (fetched.loaded !== fromTier.payloads) fromTier.release?.();
}

/**
 * Tier blocks [fromBlock, …) of the prompt's prefix (`fromBlock`: the whole
 * blocks a retained sequence already holds); none when the tier has no more.
 */
async function lookupTier(seq: RequestSequence, fromBlock: number, deps: FetchDeps): Promise<{ payloads: Uint8Array[]; release: (() => void) | null }> {
  const { cache, blockTokens, fetchPolicy, onStorageError, now } = deps;
  const { tokens, tenant, trafficClass } = seq.spec;
  const none = { payloads: [], release: null };
  const maxCachedBlocks = Math.floor((tokens.length - 1) / blockTokens);
  if (!cache || !seq.prefix) return none;
  // Looked up even when the retained sequence covers every block: the lookup renews the tier's
  // copies of the blocks this request uses and records their reuse gaps (the what-if); nothing is loaded then.
  const f = seq.figures;
  try {
    const lookupStart = now();
    const hit = await cache.lookup(seq.prefix.namespace, tokens, { tenant, trafficClass }, maxCachedBlocks, seq.keys ?? undefined);
    f.lookupMs += now() - lookupStart;
    if (hit.blocks <= fromBlock || !shouldLoad(seq, deps, (hit.blocks - fromBlock) * cache.blockBytes, (hit.blocks - fromBlock) * blockTokens)) return none;
    const loadStart = now();
    const loaded = await cache.load(hit, maxCachedBlocks, fromBlock);
    const loadMs = now() - loadStart;
    f.loadMs += loadMs;
    fetchPolicy?.observeLoad(loaded.payloads.length * cache.blockBytes, loadMs);
    return { payloads: loaded.payloads, release: loaded.release ?? null };
  } catch (error) {
    const described = describeError(error);
    f.storageError = `${described.code}: ${described.message}`;
    onStorageError?.('lookup', error);
    return none;
  }
}

/**
 * Fetch or recompute (src/cluster/fetch-or-recompute.ts): whether reading
 * `bytes` (hit blocks, or a unit's blocks and tail) is predicted to beat
 * prefilling the `tokens` they cover. A "recompute" is reported on the
 * request (recomputedHitTokens).
 */
export function shouldLoad(seq: RequestSequence, deps: FetchDeps, bytes: number, tokens: number): boolean {
  const { fetchPolicy: policy, cache } = deps;
  if (!policy || !cache) return true;
  const decision = policy.decide(1, bytes, tokens);
  // Recompute only on a clear margin: both rates are noisy, and a load also spares the pool's compute for other sequences.
  if (decision.loadBlocks > 0 || decision.predictedComputeMs * RECOMPUTE_MARGIN >= decision.predictedReadMs) return true;
  if (++deps.recomputeDecisions.count % PROBE_EVERY === 0) return true;
  seq.figures.recomputedHitTokens = tokens;
  return false;
}
