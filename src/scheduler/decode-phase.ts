/**
 * From a prompt in the KV to each accepted token: the prefilled event, the
 * first token, plain sampling or verified speculative drafts, and the end of
 * a reply on a stop token, max_tokens or a cancel. A sampler or decoder that
 * throws (a grammar dead end) fails only its own job.
 */
import type { SchedulerContext } from './scheduler-context.ts';
import type { RequestSequence } from './sequence.ts';

export class DecodePhase {
  constructor(private readonly ctx: SchedulerContext) {}

  /** The prompt is in the KV: report cache usage, then sample the first token (or, prefill-only, finish once stored). */
  promptDone(seq: RequestSequence, logits: Float32Array | null): void {
    const { ctx } = this;
    const { cache, blockTokens, emit, onStorageError, createSampler } = ctx.options;
    emit(seq.job.id, seq.prefilledEvent(cache !== null, blockTokens, ctx.now()));
    if (seq.job.prefillOnly) {
      // Out of the step loop while the blocks are written through: the decode worker reads them next.
      seq.phase = 'storing';
      const stored = (cache ? cache.flush() : Promise.resolve())
        .catch((error: unknown) => onStorageError?.('store', error))
        .finally(() => {
          ctx.pendingStores.delete(stored);
          ctx.finish(seq, 'length');
        });
      ctx.pendingStores.add(stored);
      return;
    }
    try {
      seq.sampler = createSampler(seq.job);
    } catch (error) {
      return ctx.fail(seq, error);
    }
    seq.phase = 'decode';
    this.sampleNext(seq, logits!);
  }

  sampleNext(seq: RequestSequence, logits: Float32Array): void {
    let token: number;
    try {
      token = seq.sampler!.sample(logits, seq.fedTokens.view);
    } catch (error) {
      return this.ctx.fail(seq, error);
    }
    this.accept(seq, token);
  }

  /**
   * Verified drafts: the KV now holds the fed token and the accepted drafts
   * (fedTokens mirrors it), each emitted token goes through `accept` until
   * the job ends.
   */
  acceptSpeculative(seq: RequestSequence, fed: number, rows: Float32Array): void {
    let emitted: number[];
    try {
      emitted = seq.speculative!.complete(rows);
    } catch (error) {
      return this.ctx.fail(seq, error);
    }
    // The step pushed every fed token; only the first (the last sampled) and the accepted drafts stay in the KV.
    seq.fedTokens.truncate(seq.fedTokens.length - (fed - 1));
    for (let i = 0; i + 1 < emitted.length; i++) seq.fedTokens.push(emitted[i]);
    for (const token of emitted) {
      this.accept(seq, token);
      if (!this.ctx.active.includes(seq)) break;
    }
  }

  /** A sampled token: emit it, and end the job on a stop token, max_tokens or cancel. */
  private accept(seq: RequestSequence, token: number): void {
    const { ctx } = this;
    const { sampling } = seq.job;
    const isStop = sampling.stopTokenIds.includes(token);
    seq.generated.push(token);
    ctx.options.emit(seq.job.id, { type: 'tokens', ids: [token] });
    if (isStop) ctx.finish(seq, 'stop');
    else if (seq.generated.length >= sampling.maxTokens) ctx.finish(seq, 'length');
    else if (seq.cancelled || ctx.ends.takeUnmatched(seq.job.id)) ctx.finish(seq, 'cancelled');
  }
}
