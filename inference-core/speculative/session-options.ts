/**
 * What a speculative session (speculative-session.ts) is started with and reports, and the checks
 * a start must pass: each refusal says what to change.
 */
import type { Engine } from '../engine/engine.ts';
import { EngineError } from '../engine/engine-errors.ts';
import type { Sequence } from '../engine/sequence.ts';
import type { SamplingOptions } from '../sampling/sampler.ts';
import type { DraftLengthOptions } from './draft-length.ts';
import type { TokenConstraint } from './grammar-cursor.ts';

/** ngram: the context's own n-grams; draft: a draft model; mtp: the target's own MTP block (deepseek4, engine loaded with mtp). */
export type SpeculativeMode = 'ngram' | 'draft' | 'mtp';

export interface SpeculativeSessionOptions {
  target: Sequence;
  /** Prompt and tokens generated so far; the KV holds all but the last. Copied: the session keeps its own. */
  context: ArrayLike<number>;
  sampling: SamplingOptions;
  mode: SpeculativeMode;
  /** mode 'draft': an engine with the same vocabulary (e.g. a lower-bit copy of the target). */
  draftEngine?: Engine;
  /** Draft lengths; `memory` absent: a model drafter's shared memory (drafter-memory.ts), null: none. */
  length: DraftLengthOptions;
  /**
   * Constrained reply: the grammar after the context (the first token was
   * sampled under it). Drafts are cut at the first token it rejects, every
   * verified row is masked by it, and it advances over emitted tokens only.
   */
  constraint?: TokenConstraint;
}

export interface SpeculativeStats {
  /** Target forwards that were fed drafts. */
  verifications: number;
  /** Drafted tokens the target judged (verified, or checked), and those it took or would have taken. */
  proposed: number;
  accepted: number;
  emitted: number;
  steps: number;
  /** Drafted tokens checked against a plain step's row instead of verified (probes), and those that matched. */
  checked: number;
  checkHits: number;
}

export interface SpeculativePlan {
  /** Tokens to feed the target: [g, d1 … dk]. */
  tokens: number[];
}

/** Throws (typed, naming the fix) when a session cannot start from `o`. */
export function checkSessionOptions(o: SpeculativeSessionOptions): void {
  if (o.context.length === 0 || o.target.length !== o.context.length - 1) {
    throw new EngineError(
      'KVT_ERR_ENGINE_SEQUENCE_STATE',
      `a speculative session starts with the KV holding all of the context but its last token (KV ${o.target.length}, context ${o.context.length}); sample the first token before starting it`,
    );
  }
  if (o.mode === 'draft' && !o.draftEngine) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', "speculative mode 'draft' needs a draft engine; set KVTIER_DRAFT_MODEL or use mode 'ngram'");
  }
  if (o.mode === 'mtp' && !o.target.host.hasMtp) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', "speculative mode 'mtp' needs a deepseek4 engine loaded with mtp: true (KVTIER_SPECULATIVE=mtp) from a file with an MTP block");
  }
  if (o.draftEngine && o.draftEngine.vocabSize !== o.target.host.vocabSize) {
    throw new EngineError('KVT_ERR_ENGINE_BAD_ARGUMENT', `the draft model's vocabulary (${o.draftEngine.vocabSize}) differs from the target's (${o.target.host.vocabSize}); use a draft of the same model family`);
  }
}
