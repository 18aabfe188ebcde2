export { Sampler, Prng, argmax, type SamplingOptions } from './sampler.ts';
