// Reference twin of ops/rope.cc: the angle recomputed for every element pair.
#include <cmath>

#include "../kernels.h"

namespace kvt {

void rope_ref(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, int rot_dims, int mode,
              float freq_base) {
  const int half = rot_dims / 2;
  for (int r = 0; r < rows; ++r)
    for (int h = 0; h < n_heads; ++h) {
      float* xh = x + ((size_t)r * n_heads + h) * head_dim;
      for (int p = 0; p < half; ++p) {
        double theta = (double)positions[r] * std::pow((double)freq_base, -2.0 * p / rot_dims);
        float c = (float)std::cos(theta), s = (float)std::sin(theta);
        int i0 = mode == 2 ? p : 2 * p;
        int i1 = mode == 2 ? p + half : 2 * p + 1;
        float a = xh[i0], b = xh[i1];
        xh[i0] = a * c - b * s;
        xh[i1] = a * s + b * c;
      }
    }
}

}  // namespace kvt
