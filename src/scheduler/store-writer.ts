/**
 * Hands a request's new full blocks to the cache (write-behind): after each
 * prefill chunk, and at the end of a reply. Errors are reported to
 * `onStorageError`, never thrown: a storage fault never fails a job.
 */
import type { SchedulerContext } from './scheduler-context.ts';
import type { RequestSequence } from './sequence.ts';

export class StoreWriter {
  constructor(private readonly ctx: SchedulerContext) {}

  /** Every full block of `fedTokens` not yet stored, handed over with the prompt's keys (the cache hashes only past them). */
  storeNewBlocks(seq: RequestSequence): void {
    const { cache, blockTokens, onStorageError } = this.ctx.options;
    if (!cache || !seq.kv) return;
    const fullBlocks = Math.floor(seq.fedTokens.length / blockTokens);
    if (fullBlocks <= seq.storedBlocks) return;
    const fromBlock = seq.storedBlocks;
    seq.storedBlocks = fullBlocks;
    try {
      const payloads = seq.kv.exportBlocks(fromBlock, fullBlocks);
      const { job } = seq;
      const pending = cache
        .store({
          namespace: seq.namespace,
          tokens: seq.fedTokens.view.slice(0, fullBlocks * blockTokens),
          fromBlock,
          payloads,
          tenant: job.tenant,
          trafficClass: job.trafficClass,
          ...(job.retention ? { retention: job.retention } : {}),
          ...(seq.keys ? { keys: seq.keys } : {}),
        })
        .catch((error: unknown) => onStorageError?.('store', error));
      this.ctx.pendingStores.add(pending);
      void pending.finally(() => this.ctx.pendingStores.delete(pending));
    } catch (error) {
      onStorageError?.('store', error);
    }
  }
}
