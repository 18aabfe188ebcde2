/** `kvtier replay`: public traces through the real tier (README.md). Import from here only. */
export { readTrace, parseTrace, TraceError, type ReplayRequest, type Trace, type TraceOptions } from './trace.ts';
export { BlockTokenBuffer, fillBlockTokens, tokensForBlocks } from './synth-tokens.ts';
export { IdealCache } from './ideal.ts';
export { TierTarget, type TierTargetOptions } from './tier-target.ts';
export { runReplay, emptyTally, type ReplayOutcome, type ReplayRunOptions, type ReplayTarget, type Tally } from './replay-run.ts';
export { buildReport, figuresOf, formatReport, type Figures, type ReplayReport, type ReportContext } from './replay-report.ts';
export { HttpTarget, ReplayServerError, type HttpTargetOptions } from './http-target.ts';
export { measurePrefillRate, type PrefillEngine, type PrefillRate, type PrefillRateOptions } from './engine-rate.ts';
