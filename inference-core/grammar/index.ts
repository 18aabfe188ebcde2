// JSON Schema → grammar → per-step token masks (structured output).
export { GrammarError, type GrammarErrorCode } from './grammar-errors.ts';
export type { Grammar, GrammarNode, NumBounds } from './grammar-nodes.ts';
export { compileConstraint, type ConstraintSpec, type ToolCallFormat } from './schema-compiler.ts';
export { GrammarMasks, bruteForceMask, maskHas, type MaskEntry, type MatcherState } from './token-mask.ts';
export { vocabIndexOf, buildTrie, plainStringChars, type VocabIndex, type ByteTrie } from './vocab-index.ts';
export { ConstrainedDecoder, constrainedDecoder, grammarOf, masksOf, vocabOf, minReplyTokens, type TokenVocabulary } from './constrained-decoder.ts';
