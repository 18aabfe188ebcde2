export { NgramIndex, NGRAM_MAX_N, type NgramDraft } from './ngram-draft.ts';
export { DraftLengthPolicy, bestLength, DEFAULT_FIXED_DRAFT, DEFAULT_MAX_DRAFT, type DraftLengthMode, type DraftLengthOptions } from './draft-length.ts';
export { DrafterMemory, drafterMemory } from './drafter-memory.ts';
export { acceptGreedy, acceptOne, acceptSampled, type AcceptResult } from './acceptance.ts';
export { targetDistribution, greedyToken, type TokenDistribution } from './target-distribution.ts';
export { SpeculativeSession, type SpeculativeMode, type SpeculativeSessionOptions, type SpeculativeStats, type SpeculativePlan } from './speculative-session.ts';
export { GrammarCursor, type TokenConstraint } from './grammar-cursor.ts';
export { ModelDraft } from './model-draft.ts';
export { planSpeculativeBatch, driveDrafts, type PlanRequest } from './draft-batch.ts';
