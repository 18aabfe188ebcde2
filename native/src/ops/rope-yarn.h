// Shared scalar pieces of RoPE scaling (ops/rope.cc and its twin rope-ref.cc),
// with the meaning of ggml's ggml_rope_ext / rope_yarn (llama.cpp):
//   theta_extrap = pos · base^(−2p/rot) / freq_factor[p]
//   theta_interp = freq_scale · theta_extrap                 (linear scaling)
//   YaRN (ext_factor ≠ 0): ramp = (1 − clamp((p − lo)/max(0.001, hi − lo), 0, 1)) · ext_factor
//     theta = theta_interp·(1 − ramp) + theta_extrap·ramp
//     mscale = attn_factor · (1 + 0.1·ln(1/freq_scale))
//   cos/sin are multiplied by mscale (attn_factor alone without YaRN).
// lo/hi ("correction dims") are computed in float exactly as ggml does, so
// the ramp's integer break points are the reference's.
#pragma once
#include <algorithm>
#include <cmath>

#include "../kernels.h"

namespace kvt {

// ggml_rope_yarn_corr_dim: the pair index whose wavelength fits n_rot
// rotations in the original context.
inline float rope_yarn_corr_dim(int n_dims, int n_ctx_orig, float n_rot, float base) {
  return n_dims * logf(n_ctx_orig / (n_rot * 2 * (float)M_PI)) / (2 * logf(base));
}

inline void rope_yarn_corr_dims(const RopeParams& p, float dims[2]) {
  float start = floorf(rope_yarn_corr_dim(p.rot_dims, p.n_ctx_orig, p.beta_fast, p.freq_base));
  float end = ceilf(rope_yarn_corr_dim(p.rot_dims, p.n_ctx_orig, p.beta_slow, p.freq_base));
  dims[0] = std::max(0.0f, start);
  dims[1] = std::min((float)(p.rot_dims - 1), end);
}

// The YaRN mix weight of pair `pair` (0 without YaRN).
inline float rope_yarn_mix(const RopeParams& p, const float dims[2], int pair) {
  if (p.ext_factor == 0.0f) return 0.0f;
  const float y = ((float)pair - dims[0]) / std::max(0.001f, dims[1] - dims[0]);
  return (1.0f - std::min(1.0f, std::max(0.0f, y))) * p.ext_factor;
}

// The factor cos and sin are multiplied by.
inline float rope_mscale(const RopeParams& p) {
  float m = p.attn_factor;
  if (p.ext_factor != 0.0f) m *= 1.0f + 0.1f * logf(1.0f / p.freq_scale);
  return m;
}

}  // namespace kvt
