export { Sampler, Prng, argmax, type SamplingOptions } from './sampler.ts';
export { adjustsLogits } from './logit-adjust.ts';
