/**
 * One request, as the API built it: the one record that travels unchanged
 * from the route to the engine thread.
 *
 *   route ─ buildSpec (src/serve: limits checked here, once) ─▶ RequestSpec
 *     ─▶ in-process: the engine thread's port (structured clone keeps the Uint32Array)
 *     ─▶ BullMQ: toQueued / fromQueued (src/workers/bullmq-protocol.ts), the one
 *        conversion each way at the JSON boundary (tokens as a number array)
 *     ─▶ src/scheduler: RequestSequence.spec, read, never re-mapped
 *
 * Token ids travel, not text: the API process owns detokenizing, stop
 * strings and the response shapes, so workers stay format-agnostic.
 * Invariant: `tokens.length ≥ 1` and `tokens.length + sampling.maxTokens`
 * fits the model's context (the builder refused it otherwise; the
 * scheduler asserts it).
 */
import type { ConstraintSpec } from '../inference-core/index.ts';

/** Retention a client asked for (src/recipe/cache-retention.ts reads it): it can only shorten a block's life or skip storing. */
export interface CacheRetentionHint {
  /** Longest the request's blocks should live after their last use, before the policy's cap. */
  ttlMs?: number;
  /** Store none of this request's blocks (reading cached ones is still allowed). */
  noStore?: boolean;
}

/** Sampling of one request, validated by the recipe and read as is by the engine thread's sampler. */
export interface SamplingSpec {
  maxTokens: number;
  temperature: number;
  topP: number;
  topK: number;
  seed: number;
  /** Ids that end the reply (the model's EOS, end of turn). */
  stopTokenIds: number[];
  /** Text stops: matched by the API process on the detokenized reply (workers ignore them). */
  stopStrings?: string[];
  /** [token id, bias] pairs (OpenAI logit_bias; a JSON-safe form); absent when the request set none. */
  logitBias?: [number, number][];
  /** OpenAI's penalties over the tokens generated so far (inference-core/sampling/logit-adjust.ts). */
  presencePenalty?: number;
  frequencyPenalty?: number;
}

export interface RequestSpec {
  id: string;
  /** The served model id; a worker serving another model fails the job. */
  model: string;
  tenant: string;
  /** Hex salt of the tenant's namespace (derived by the API from its secret; workers never see the secret). */
  tenantSalt: string;
  trafficClass: string;
  /** The prompt's ids as the recipe built them (typed once; carried to the engine without a conversion in process). */
  tokens: Uint32Array;
  sampling: SamplingSpec;
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
  /** Absent: the class TTL. */
  retention?: CacheRetentionHint;
}
