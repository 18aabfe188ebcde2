#include <cmath>

#include "ref.h"

namespace kvt_ref {

// out[n] = silu(gate[n]) * up[n]
void swiglu(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const double g = gate[i];
    out[i] = (float)(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

}  // namespace kvt_ref
