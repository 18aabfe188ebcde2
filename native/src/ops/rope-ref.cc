// Reference twin of ops/rope.cc: the angle (frequency factor, linear / YaRN
// scaling, mscale) recomputed for every element pair, plain loops.
#include <cmath>

#include "../kernels.h"
#include "rope-yarn.h"

namespace kvt {

void rope_ref(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, const RopeParams& p) {
  const int half = p.rot_dims / 2;
  float corr[2];
  rope_yarn_corr_dims(p, corr);
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + ((size_t)r * n_heads + h) * head_dim;
      for (int i = 0; i < half; ++i) {
        double extrap = (double)positions[r] * std::pow((double)p.freq_base, -2.0 * i / p.rot_dims);
        if (p.freq_factors) extrap /= (double)p.freq_factors[i];
        double theta = (double)p.freq_scale * extrap;
        const float mix = rope_yarn_mix(p, corr, i);
        if (mix != 0.0f) theta = theta * (1.0 - (double)mix) + extrap * (double)mix;
        const float mscale = rope_mscale(p);
        float c = (float)std::cos(theta) * mscale, s = (float)std::sin(theta) * mscale;
        int i0 = p.mode == 2 ? i : 2 * i;
        int i1 = p.mode == 2 ? i + half : 2 * i + 1;
        float a = xh[i0], b = xh[i1];
        xh[i0] = a * c - b * s;
        xh[i1] = a * s + b * c;
      }
    }
}

}  // namespace kvt
