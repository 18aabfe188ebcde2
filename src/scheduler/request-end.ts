/**
 * How a request leaves the scheduler. `finish`: the done event first, then
 * (off the reply's critical path) the last token fed when it completes a
 * block, the reply's blocks stored, and the KV retained for a next turn —
 * or freed for a cancel, a closing worker or a no-store request. `fail`: the
 * KV freed and a typed error event. Either way the request's claims on
 * prompt blocks are released, so nobody waits for it any more.
 */
import type { RequestSpec } from './job.ts';
import type { FinishReason, SchedulerContext } from './scheduler-context.ts';
import type { RequestSequence } from './sequence.ts';
import type { StoreWriter } from './store-writer.ts';

export class RequestEnd {
  constructor(
    private readonly ctx: SchedulerContext,
    private readonly store: StoreWriter,
  ) {}

  finish(seq: RequestSequence, reason: FinishReason): void {
    const { ctx } = this;
    if (!this.remove(seq)) return;
    const { emit, cache, blockTokens, onStorageError } = ctx.options;
    emit(seq.job.id, seq.doneEvent(reason, ctx.now()));
    seq.speculative?.free();
    const kv = seq.kv;
    if (!kv) return;
    // After the answer is out: feed the last token when it completes a block, then store the reply's blocks.
    try {
      const last = seq.generated[seq.generated.length - 1];
      if (reason !== 'cancelled' && last !== undefined && cache && (seq.fedTokens.length + 1) % blockTokens === 0) {
        kv.decode(last);
        seq.fedTokens.push(last);
      }
      this.store.storeNewBlocks(seq);
    } catch (error) {
      onStorageError?.('store', error);
    }
    // No-store: the request's KV is not kept past it, not even in the engine's pool of retained sequences.
    if (reason === 'cancelled' || ctx.closed || seq.job.retention?.noStore) {
      kv.free();
      seq.kv = null;
    } else ctx.retained.put(seq);
  }

  fail(seq: RequestSequence, error: unknown): void {
    if (!this.remove(seq)) return;
    seq.dropLoaded();
    seq.speculative?.free();
    seq.kv?.free();
    seq.kv = null;
    const coded = error as { code?: unknown };
    const code = typeof coded.code === 'string' && coded.code.startsWith('KVT_ERR_') ? coded.code : 'KVT_ERR_WORKER_FAILED';
    this.ctx.options.emit(seq.job.id, { type: 'error', code, message: error instanceof Error ? error.message : String(error) });
  }

  /** A job that ended by its cancel before it was admitted. */
  cancelledUnstarted(job: RequestSpec): void {
    this.ctx.ends.endedUnstarted();
    this.ctx.options.emit(job.id, { type: 'done', finishReason: 'cancelled', completionTokens: 0, workerMs: 0, decodeTokens: 0, prefillTokens: 0 });
  }

  /** Takes `seq` out of the admitted set; false when it was already out. */
  private remove(seq: RequestSequence): boolean {
    const { ctx } = this;
    const at = ctx.active.indexOf(seq);
    if (at === -1) return false;
    ctx.active.splice(at, 1);
    seq.phase = 'finished';
    ctx.computing.release(seq, ctx.active);
    ctx.ends.endedHeld(seq.job.id, ctx.steps);
    return true;
  }
}
