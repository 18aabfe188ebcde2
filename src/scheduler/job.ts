/**
 * What a worker streams back for one RequestSpec (src/request-spec.ts), in
 * process or over BullMQ:
 *
 *   API ──RequestSpec──▶ worker:  prefilled → tokens* → done      (or error at any point)
 */
import type { CacheRetentionHint, RequestSpec, SamplingSpec } from '../request-spec.ts';

export type { CacheRetentionHint, RequestSpec, SamplingSpec };

export type JobEvent =
  | {
      type: 'prefilled';
      promptTokens: number;
      cachedTokens: number;
      /** Whole prompt blocks this job handed to the cache (write-behind). */
      storedPromptTokens: number;
      queueMs: number;
      lookupMs: number;
      loadMs: number;
      prefillMs: number;
      /** Cached tokens that fetch-or-recompute chose to compute rather than read (not in cachedTokens). */
      recomputedHitTokens?: number;
      /** A storage fault during lookup/load that was degraded to a miss. */
      storageError?: string;
    }
  | { type: 'tokens'; ids: number[] }
  | {
      type: 'done';
      finishReason: 'stop' | 'length' | 'cancelled';
      completionTokens: number;
      /** Worker time from taking the job to its last token (lookup, load, prefill, decode). */
      workerMs: number;
      decodeTokens: number;
      prefillTokens: number;
      /** Speculative decoding: drafted tokens verified, and accepted. */
      speculative?: { proposed: number; accepted: number };
      /** Set by `kvtier worker`: it wrote the reply's shared reply-memory records ahead of this event (the API then keeps them locally only). */
      repliesShared?: boolean;
    }
  | { type: 'error'; code: string; message: string };

export interface JobStats {
  promptTokens: number;
  cachedTokens: number;
  storedPromptTokens: number;
  completionTokens: number;
  finishReason: 'stop' | 'length' | 'cancelled';
  workerMs: number;
  queueMs: number;
}

/** The id clients pass as `model`: `synthetic:small` as given, a GGUF path by its file name without `.gguf`. */
export function modelIdOf(model: string): string {
  return model.startsWith('synthetic:') ? model : (model.split(/[\\/]/).pop() ?? model).replace(/\.gguf$/i, '');
}
