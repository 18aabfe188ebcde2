// Reference twin of dsv4_swiglu_clamp (see dsv4-swiglu.h): one thread, one value at a time.
#include <cmath>

#include "dsv4-swiglu.h"

namespace kvt {

void dsv4_swiglu_clamp_ref(float* out, const float* g, const float* u, size_t n, double limit) {
  for (size_t i = 0; i < n; ++i) {
    double gv = g[i];
    double uv = u[i];
    if (limit > 1e-6) {
      gv = std::fmin(gv, limit);
      uv = std::fmin(std::fmax(uv, -limit), limit);
    }
    out[i] = (float)(gv / (1.0 + std::exp(-gv)) * uv);
  }
}

}  // namespace kvt
