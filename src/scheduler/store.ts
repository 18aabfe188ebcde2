/**
 * Hands a request's new full blocks to the cache (write-behind): after each
 * prefill chunk, and at the end of a reply. Errors are reported to
 * `onStorageError`, never thrown: a storage fault never fails a job.
 */
import type { CacheTier } from './ports.ts';
import type { RequestSequence } from './sequence.ts';
import type { UnitPolicy } from './units.ts';

export interface StoreDeps {
  cache: CacheTier | null;
  blockTokens: number;
  /** Writes in flight, so close() waits for write-behind. */
  pendingStores: Set<Promise<unknown>>;
  onStorageError?: (phase: 'lookup' | 'load' | 'store', error: unknown) => void;
  /** Unit mode: blocks hold the unit's block layers only (gemma3's global layers), exported through the unit port. */
  units?: UnitPolicy | null;
}

/** Every full block of `fedTokens` not yet stored, handed over with the prompt's keys (the cache hashes only past them). */
export function storeNewBlocks(seq: RequestSequence, deps: StoreDeps): void {
  const { cache, blockTokens, onStorageError, pendingStores } = deps;
  if (!cache || !seq.kv || !seq.prefix) return;
  const fullBlocks = Math.floor(seq.fedTokens.length / blockTokens);
  if (fullBlocks <= seq.storedBlocks) return;
  const fromBlock = seq.storedBlocks;
  seq.storedBlocks = fullBlocks;
  try {
    const payloads = deps.units ? deps.units.engine.exportBlocks(seq.kv, fromBlock, fullBlocks) : seq.kv.exportBlocks(fromBlock, fullBlocks);
    const { spec, keys } = seq;
    const pending = cache
      .store({
        namespace: seq.prefix.namespace,
        tokens: seq.fedTokens.view.slice(0, fullBlocks * blockTokens),
        fromBlock,
        payloads,
        tenant: spec.tenant,
        trafficClass: spec.trafficClass,
        ...(spec.retention ? { retention: spec.retention } : {}),
        ...(keys ? { keys } : {}),
      })
      .catch((error: unknown) => onStorageError?.('store', error));
    pendingStores.add(pending);
    void pending.finally(() => pendingStores.delete(pending));
  } catch (error) {
    onStorageError?.('store', error);
  }
}
