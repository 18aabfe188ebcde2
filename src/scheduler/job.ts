/**
 * The prefill job: what the API process sends a worker (in-process thread or
 * a `kvtier worker` over BullMQ), and the events the worker streams back.
 *
 *   API ──job──▶ worker:  prefilled → tokens* → done      (or error at any point)
 *
 * Token ids travel, not text: the API process owns detokenizing, stop strings
 * and the response shapes, so workers stay format-agnostic.
 */
import type { ConstraintSpec } from '../../inference-core/grammar/index.ts';

export interface JobSampling {
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
  stopTokenIds: number[];
  /** [token id, bias] pairs (a JSON-safe form for BullMQ); absent when the request set none. */
  logitBias?: [number, number][];
  presencePenalty?: number;
  frequencyPenalty?: number;
}

export interface PrefillJob {
  id: string;
  /** The served model id; a worker serving another model fails the job. */
  model: string;
  tenant: string;
  /** Hex salt of the tenant's namespace (derived by the API from its secret; workers never see the secret). */
  tenantSalt: string;
  trafficClass: string;
  /**
   * The prompt's token ids, typed once where the API builds the job and carried as is to the engine
   * (a worker thread's structured clone keeps it; BullMQ's JSON carries a number array, bullmq-protocol.ts).
   */
  tokens: Uint32Array;
  sampling: JobSampling;
  /** Epoch ms when the API accepted the request (queue time = start − this). */
  submittedAt: number;
  /**
   * The prefill half of a prefill/decode split: compute and store the
   * prompt's full blocks (written through, not behind), sample nothing; the
   * job ends with `prefilled` then `done` (0 completion tokens) once they are
   * in storage.
   */
  prefillOnly?: boolean;
  /** Structured output: the reply is held to this grammar (JSON Schema, any JSON object, or a tool call). */
  constraint?: ConstraintSpec;
  /** Retention the client asked for (recipe/cache-retention.ts); the tier caps ttlMs by the policy. */
  retention?: { ttlMs?: number; noStore?: boolean };
}

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
