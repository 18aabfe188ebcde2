#include <cmath>

#include "ref.h"

namespace kvt_ref {

// y[T,d] = x * 1/sqrt(mean(x^2) + eps) * w[d]
void rmsnorm(float* y, const float* x, const float* w, int t, int d, float eps) {
  for (int r = 0; r < t; ++r) {
    const float* xr = x + (size_t)r * d;
    double ss = 0;
    for (int j = 0; j < d; ++j) ss += (double)xr[j] * xr[j];
    const double inv = 1.0 / std::sqrt(ss / d + eps);
    for (int j = 0; j < d; ++j) y[(size_t)r * d + j] = (float)(xr[j] * inv * w[j]);
  }
}

}  // namespace kvt_ref
