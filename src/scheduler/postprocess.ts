/**
 * postprocess: the one place a sequence changes status (nano-vllm's
 * `Scheduler.postprocess`, widened to the events a tier adds). The loop
 * calls down into it with what happened — an engine step's results, a fetch
 * or a prefill-only flush that completed, a cancel — and it moves each
 * sequence on: prefill → decode, finish, fail, free or retain the KV, hand
 * blocks to the store writer. I/O it needs next (a fetch, a flush) is
 * returned in `io` for the loop to start; nothing here calls back up.
 *
 *   Fetching ──fetched──▶ Deferred | Prefill | Finished(cancelled) | Fetching again (look again)
 *   Prefill  ──step─────▶ Prefill | (prompt done) Decode | Storing (prefillOnly)
 *   Decode   ──step─────▶ Decode | Finished (stop, length, cancel) ──▶ Retained | KV freed
 *   Storing  ──stored───▶ Finished          any ──error──▶ Finished, KV freed, error event
 */
import { TokenIds } from '../../inference-core/index.ts';
import { isKvtCoded } from '../errors.ts';
import type { RequestSpec } from './job.ts';
import type { Io, LoopEvent, LoopState } from './loop-state.ts';
import type { RetainedSequences } from './retained-sequences.ts';
import type { StepPlan } from './schedule.ts';
import { SequenceStatus, type FinishReason, type RequestSequence } from './sequence.ts';
import { storeNewBlocks } from './store.ts';
import { importFetchedUnit, unitDue, writeUnit } from './units.ts';

/** A step's results, row by row: tokens fed, sampled or verified, blocks stored, prompts done. */
export function postprocess(s: LoopState, plan: StepPlan, results: (Float32Array | null)[], io: Io): void {
  plan.rows.forEach((row, i) => {
    const { seq } = row;
    const fed = plan.items[i].tokens;
    seq.fedTokens.append(fed);
    if (row.kind === 'decode') {
      if (s.units && unitDue(seq, s.units, false)) {
        storeNewBlocks(seq, s);
        writeUnit(seq, s.units, s.onStorageError);
      }
      return sampleNext(s, seq, results[i]!);
    }
    if (row.kind === 'spec') return acceptSpeculative(s, seq, fed.length, results[i]!);
    storeNewBlocks(seq, s);
    if (s.units && unitDue(seq, s.units, row.done)) writeUnit(seq, s.units, s.onStorageError);
    if (row.done) promptDone(s, seq, results[i], io);
  });
}

/** Before the step runs: the sequences whose planning failed, and every row's sequence when the step threw. */
export function failAll(s: LoopState, failed: readonly { seq: RequestSequence; error: unknown }[]): void {
  for (const { seq, error } of failed) fail(s, seq, error);
}

export function onEvent(s: LoopState, event: LoopEvent, io: Io): void {
  if (event.type === 'fetchFailed') return fail(s, event.seq, event.error);
  if (event.type === 'stored') return finish(s, event.seq, 'length');
  fetched(s, event.seq, io);
}

/** A fetch (again) of `seq`: keying and claims are done by the loop before its I/O starts. */
export function beginFetch(s: LoopState, seq: RequestSequence): void {
  seq.status = SequenceStatus.Fetching;
  s.computing.lookupStarted(seq);
}

/** Deferred requests whose blocker stored the shared blocks (or is gone) look up again. */
export function releaseDeferred(s: LoopState, releasable: (seq: RequestSequence) => boolean, io: Io): void {
  for (const seq of s.active) {
    if (seq.status !== SequenceStatus.Deferred || !releasable(seq)) continue;
    seq.flight.waitFor = null;
    io.fetch.push(seq);
  }
}

/** Cancelled requests end at the next step at the latest (a fetch in flight when it returns, a prefill-only write when it lands). */
export function reapCancelled(s: LoopState): void {
  for (const seq of [...s.active]) {
    seq.cancelled ||= s.ends.takeUnmatched(seq.id);
    const { status } = seq;
    if (seq.cancelled && (status === SequenceStatus.Prefill || status === SequenceStatus.Decode || status === SequenceStatus.Deferred)) finish(s, seq, 'cancelled');
  }
}

/** The lookup returned: end a cancelled request, defer behind a blocker, look again, or import the prefix and prefill. */
function fetched(s: LoopState, seq: RequestSequence, io: Io): void {
  const { blockTokens, engine, retained } = s;
  const found = seq.fetched!;
  const donor = found.donor;
  found.donor = null;
  const putBack = () => {
    if (donor) retain(retained, donor);
    seq.dropLoaded();
  };
  if (seq.cancelled || s.closed) {
    putBack();
    return finish(s, seq, 'cancelled');
  }
  const unit = found.unit ?? null;
  let cachedTokens = unit ? unit.position : (donor ? found.reusable : 0) + found.loaded.length * blockTokens;
  const blocker = s.computing.blockerOf(seq, Math.floor(cachedTokens / blockTokens), blockTokens);
  if (blocker === 'look-again') {
    // Another request stored the next block while this lookup was in flight: it is in the tier now.
    putBack();
    s.computing.lookingAgain(seq, Math.floor(cachedTokens / blockTokens));
    io.fetch.push(seq);
    return;
  }
  if (blocker) {
    putBack();
    seq.status = SequenceStatus.Deferred;
    seq.flight.waitFor = blocker.owner;
    seq.flight.waitBlocks = blocker.blocks;
    return;
  }
  const imported = found.loaded.length;
  try {
    if (donor) {
      // Takes over the retained record's KV, truncated to the tokens this prompt shares with it.
      seq.kv = donor.kv;
      donor.kv = null;
      donor.status = SequenceStatus.Finished;
      // Unit mode takes only a whole donor (units.ts takeWholeDonor): nothing to cut, and its state past the pages stays as it is.
      if (found.reusable < donor.fedTokens.length) seq.kv!.truncate(found.reusable);
    } else seq.kv = engine.createSequence();
    if (unit) {
      if (!importFetchedUnit(seq, s.units!, unit, s.onStorageError)) cachedTokens = 0;
    } else if (imported > 0) seq.kv!.importBlocks(found.loaded);
  } catch (error) {
    return fail(s, seq, error);
  } finally {
    // The engine copied them into its pages: their read buffers go back to the tier's pool.
    seq.dropLoaded();
  }
  const { spec } = seq;
  seq.figures.cachedTokens = cachedTokens;
  // Room for the whole prompt and reply: the KV's mirror grows in place.
  seq.fedTokens = new TokenIds(spec.tokens.length + spec.sampling.maxTokens);
  seq.fedTokens.append(spec.tokens.subarray(0, cachedTokens));
  // Blocks that came from the tier are stored; a retained sequence's own are stored up to what it handed off.
  seq.storedBlocks = donor && imported === 0 ? Math.min(donor.storedBlocks, Math.floor(found.reusable / blockTokens)) : Math.floor(cachedTokens / blockTokens);
  if (s.units) {
    seq.units.stops = s.units.promptStops(cachedTokens, seq.promptTarget, seq.units.commonEnd);
    seq.units.lastAt = cachedTokens;
  }
  seq.figures.prefillStartedAt = s.now();
  seq.fetched = null;
  seq.status = SequenceStatus.Prefill;
  if (seq.fedTokens.length >= seq.promptTarget) promptDone(s, seq, null, io); // prefillOnly with everything cached
}

/** The prompt is in the KV: report cache usage, then sample the first token (or, prefill-only, finish once stored). */
function promptDone(s: LoopState, seq: RequestSequence, logits: Float32Array | null, io: Io): void {
  s.emit(seq.id, seq.prefilledEvent(s.cache !== null, s.blockTokens, s.now()));
  if (seq.spec.prefillOnly) {
    // Out of the step loop while the blocks are written through: the decode worker reads them next.
    seq.status = SequenceStatus.Storing;
    io.flush.push(seq);
    return;
  }
  try {
    seq.decoding = { decoder: s.decoders.create(seq.spec) };
  } catch (error) {
    return fail(s, seq, error);
  }
  seq.status = SequenceStatus.Decode;
  sampleNext(s, seq, logits!);
}

function sampleNext(s: LoopState, seq: RequestSequence, logits: Float32Array): void {
  let token: number;
  try {
    token = seq.decoding!.decoder.sample(logits, seq.fedTokens.view);
  } catch (error) {
    return fail(s, seq, error);
  }
  accept(s, seq, token);
}

/** Verified drafts: the KV holds the fed token and the accepted drafts (fedTokens mirrors it); each emitted token is accepted until the job ends. */
function acceptSpeculative(s: LoopState, seq: RequestSequence, fed: number, rows: Float32Array): void {
  let emitted: number[];
  try {
    emitted = seq.speculative!.complete(rows);
  } catch (error) {
    return fail(s, seq, error);
  }
  // The step pushed every fed token; only the first (the last sampled) and the accepted drafts stay in the KV.
  seq.fedTokens.truncate(seq.fedTokens.length - (fed - 1));
  for (let i = 0; i + 1 < emitted.length; i++) seq.fedTokens.push(emitted[i]);
  for (const token of emitted) {
    accept(s, seq, token);
    if (seq.status !== SequenceStatus.Decode) break;
  }
}

/** A sampled token: emit it, and end the job on a stop token, max_tokens or cancel. */
function accept(s: LoopState, seq: RequestSequence, token: number): void {
  const { sampling } = seq.spec;
  seq.generated.push(token);
  s.emit(seq.id, { type: 'tokens', ids: [token] });
  if (sampling.stopTokenIds.includes(token)) finish(s, seq, 'stop');
  else if (seq.generated.length >= sampling.maxTokens) finish(s, seq, 'length');
  else if (seq.cancelled || s.ends.takeUnmatched(seq.id)) finish(s, seq, 'cancelled');
}

/**
 * The done event first, then (off the reply's critical path) the last token
 * fed when it completes a block, the reply's blocks stored, and the KV
 * retained for a next turn — or freed for a cancel, a closing worker or a
 * no-store request.
 */
export function finish(s: LoopState, seq: RequestSequence, reason: FinishReason): void {
  if (!remove(s, seq)) return;
  s.emit(seq.id, seq.doneEvent(reason, s.now()));
  seq.speculative?.free();
  const kv = seq.kv;
  if (!kv) return;
  try {
    const last = seq.generated[seq.generated.length - 1];
    // Unit mode feeds it always: the end-of-output unit then covers the whole reply, as the next turn's prompt holds it.
    if (reason !== 'cancelled' && last !== undefined && s.cache && (s.units || (seq.fedTokens.length + 1) % s.blockTokens === 0)) {
      kv.decode(last);
      seq.fedTokens.push(last);
    }
    storeNewBlocks(seq, s);
    if (s.units && reason !== 'cancelled') writeUnit(seq, s.units, s.onStorageError);
  } catch (error) {
    s.onStorageError?.('store', error);
  }
  // No-store: the request's KV is not kept past it, not even in the engine's pool of retained sequences.
  if (reason === 'cancelled' || s.closed || seq.spec.retention?.noStore) freeKv(seq);
  else retain(s.retained, seq);
}

/** The KV freed and a typed error event. */
export function fail(s: LoopState, seq: RequestSequence, error: unknown): void {
  if (!remove(s, seq)) return;
  seq.dropLoaded();
  seq.speculative?.free();
  freeKv(seq);
  s.emit(seq.id, { type: 'error', code: isKvtCoded(error) ? error.code : 'KVT_ERR_WORKER_FAILED', message: error instanceof Error ? error.message : String(error) });
}

/** A job that ended by its cancel before it was admitted. */
export function cancelledUnstarted(s: LoopState, spec: RequestSpec): void {
  s.ends.endedUnstarted();
  s.emit(spec.id, { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 });
}

/** Into the pool of retained sequences (KV kept for a next turn), or freed when the pool keeps none. */
export function retain(pool: RetainedSequences, seq: RequestSequence): void {
  if (!seq.kv || !pool.put(seq)) return freeKv(seq);
  seq.status = SequenceStatus.Retained;
}

/** Frees the KV of a sequence that no longer runs (an evicted retained one included). */
export function freeKv(seq: RequestSequence): void {
  seq.kv?.free();
  seq.kv = null;
  seq.status = SequenceStatus.Finished;
}

/** Takes `seq` out of the admitted set; false when it was already out. Its claims on prompt blocks go with it. */
function remove(s: LoopState, seq: RequestSequence): boolean {
  const at = s.active.indexOf(seq);
  if (at === -1) return false;
  s.active.splice(at, 1);
  seq.status = SequenceStatus.Finished;
  s.computing.release(seq, s.active);
  s.ends.endedHeld(seq.id, s.steps);
  return true;
}
