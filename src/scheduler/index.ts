export { modelIdOf, type RequestSpec, type JobEvent, type JobStats } from './job.ts';
export type { SamplingSpec, CacheRetentionHint } from '../request-spec.ts';
export { engineThreadInit, type AdminCall, type AdminReply, type TierStatsReply, type EngineThreadInit, type FromEngineThread, type ToEngineThread } from './engine-thread-protocol.ts';
export { PrefillScheduler, type SchedulerOptions, type SchedulerState } from './prefill-scheduler.ts';
export { KvTierCache } from './cache-adapter.ts';
export type { CacheTier, EngineModel } from './ports.ts';
export { adminCall } from './tier-admin.ts';
export { checkBlockTokens } from './block-tokens-check.ts';
export { patchPolicyDoc, type PolicyPatch } from './policy-patch.ts';

/** The engine thread's entry (worker_threads): the transports start it (src/workers/engine-host.ts). */
export const ENGINE_THREAD_URL = new URL('./engine-thread.ts', import.meta.url);
