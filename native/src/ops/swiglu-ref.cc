// Reference twin of ops/swiglu.cc.  out[n] = silu(gate) · up
#include "../kernels.h"

namespace kvt {

void swiglu_ref(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    float g = gate[i];
    out[i] = (g / (1.0f + exp_kvt(0.0f - g))) * up[i];
  }
}

}  // namespace kvt
