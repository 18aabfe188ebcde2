/**
 * The rope scaling a model's metadata asks for, as the native rope op's
 * parameters, computed the way llama.cpp's context does (llama_context's
 * cparams, in f32):
 *
 *   freq_scale  = 1 / factor                      (type 'none': 1)
 *   ext_factor  = 1 for 'yarn', else 0
 *   attn_factor = rope.scaling.attn_factor, and for YaRN additionally
 *                 mscale(factor) / (1 + 0.1·ln factor), mscale(s) = 1 + 0.1·ln s
 *                 (the kernel multiplies 1 + 0.1·ln(1/freq_scale) back in)
 *   beta_fast 32, beta_slow 1, n_ctx_orig = rope.scaling.original_context_length
 *
 * llama.cpp reads `rope.scaling.yarn_{ext_factor,attn_factor,beta_fast,beta_slow}`
 * only for grok; for llama, qwen2 and qwen3 it keeps the defaults above even
 * when a converter wrote them, and so do we.
 */
import type { RopeScaling } from '../../native/index.ts';
import type { RopeScalingConfig } from '../model-config.ts';
import { EngineError } from './engine-errors.ts';

const f = Math.fround;

/** llama.cpp's get_mscale(scale, mscale), in f32. */
function yarnMscale(scale: number, mscale: number): number {
  return scale <= 1 ? 1 : f(f(f(f(0.1) * mscale) * f(Math.log(scale))) + 1);
}

/** Native rope scaling for the metadata, or undefined when it is plain RoPE. */
export function ropeScalingFrom(s: RopeScalingConfig, where: string): RopeScaling | undefined {
  if (s.type !== 'none' && s.type !== 'linear' && s.type !== 'yarn') {
    throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${where}: rope scaling "${s.type}" is not supported (none, linear and yarn are); use a model without it`);
  }
  if (!(s.factor > 0) || !Number.isFinite(s.factor)) {
    throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${where}: rope.scaling.factor ${s.factor} must be a positive number`);
  }
  const freqScale = s.type === 'none' ? 1 : f(1 / f(s.factor));
  const yarn = s.type === 'yarn';
  let attnFactor = 1;
  if (yarn) {
    const factor = f(1 / freqScale);
    attnFactor = yarnMscale(factor, 1);
    attnFactor = f(attnFactor * f(1 / f(1 + f(f(0.1) * f(Math.log(factor))))));
  }
  attnFactor = f(attnFactor * f(s.attnFactor));
  if (yarn && !(s.originalContext > 0)) {
    throw new EngineError('KVT_ERR_ENGINE_UNSUPPORTED_MODEL', `${where}: YaRN scaling needs rope.scaling.original_context_length (or context_length) > 0`);
  }
  if (freqScale === 1 && !yarn && attnFactor === 1) return undefined;
  return { freqScale, extFactor: yarn ? 1 : 0, attnFactor, betaFast: 32, betaSlow: 1, nCtxOrig: s.originalContext };
}
