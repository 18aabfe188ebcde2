// RoPE, in place (ISA-independent: O(rows·heads·dim), angles dominate).
//   x [rows][n_heads][head_dim], positions [rows], freq_factors [rot_dims/2]
//   pair p < rot/2 rotates by theta_p(pos) (rope-yarn.h: frequency factors,
//   linear and YaRN scaling as llama.cpp computes them):
//     normal (GPT-J, llama GGUF): (x[2p], x[2p+1]);  neox: (x[p], x[p+rot/2])
//   dims >= rot_dims are left as they are (partial rotary).
// Angles are computed once per row in double, cos/sin rounded to float and
// multiplied by mscale in float, and shared by the row's heads.
#include <cmath>
#include <vector>

#include "../kernels.h"
#include "rope-yarn.h"

namespace kvt {

static void rope_angles(float* cs, float* sn, int pos, const RopeParams& p, const float corr[2], float mscale) {
  for (int i = 0; i < p.rot_dims / 2; ++i) {
    double extrap = (double)pos * std::pow((double)p.freq_base, -2.0 * i / p.rot_dims);
    if (p.freq_factors) extrap /= (double)p.freq_factors[i];
    double theta = (double)p.freq_scale * extrap;
    const float mix = rope_yarn_mix(p, corr, i);
    if (mix != 0.0f) theta = theta * (1.0 - (double)mix) + extrap * (double)mix;
    cs[i] = (float)std::cos(theta) * mscale;
    sn[i] = (float)std::sin(theta) * mscale;
  }
}

static void rope_head(float* x, const float* cs, const float* sn, int rot_dims, int mode) {
  const int half = rot_dims / 2;
  for (int p = 0; p < half; ++p) {
    int i0 = mode == 2 ? p : 2 * p;
    int i1 = mode == 2 ? p + half : 2 * p + 1;
    float a = x[i0], b = x[i1];
    x[i0] = a * cs[p] - b * sn[p];
    x[i1] = a * sn[p] + b * cs[p];
  }
}

void rope(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, const RopeParams& p,
          ThreadPool& pool) {
  float corr[2];
  rope_yarn_corr_dims(p, corr);
  const float mscale = rope_mscale(p);
  parallel_for(pool, (size_t)rows, [&](size_t b, size_t e) {
    std::vector<float> cs(p.rot_dims / 2 + 1), sn(p.rot_dims / 2 + 1);
    for (size_t r = b; r < e; ++r) {
      rope_angles(cs.data(), sn.data(), positions[r], p, corr, mscale);
      for (int h = 0; h < n_heads; ++h)
        rope_head(x + (r * n_heads + h) * head_dim, cs.data(), sn.data(), p.rot_dims, p.mode);
    }
  }, 8);
}

}  // namespace kvt
