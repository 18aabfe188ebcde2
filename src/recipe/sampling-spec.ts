/**
 * The last step of every API's sampling parser: the fields it read, plus
 * the model's stop ids, as the request spec's `sampling` (src/request-spec.ts),
 * built once and carried as is to the engine thread's sampler.
 */
import type { SamplingSpec } from '../request-spec.ts';

export interface SamplingLimits {
  defaultMaxTokens: number;
  /** The model's ids that end a reply (PromptCodec.stopTokenIds). */
  stopTokenIds: readonly number[];
}

export function samplingSpec(fields: Omit<SamplingSpec, 'stopTokenIds'>, limits: SamplingLimits): SamplingSpec {
  return {
    ...fields,
    // A temperature so small that 1/t overflows is greedy decoding (the sampler draws with 1/t).
    temperature: Number.isFinite(1 / fields.temperature) ? fields.temperature : 0,
    stopTokenIds: [...limits.stopTokenIds],
  };
}
