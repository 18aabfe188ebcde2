// Reference twin of ops/rmsnorm.cc.  out[rows][dim] = x / sqrt(mean(x²)+eps) · gain
#include "../kernels.h"

namespace kvt {

void rmsnorm_ref(float* out, const float* x, const float* gain, int rows, int dim, float eps) {
  for (int r = 0; r < rows; ++r) {
    const float* xr = x + (size_t)r * dim;
    float lanes[16] = {0};
    for (int i = 0; i < dim; ++i) lanes[i % 16] = std::fmaf(xr[i], xr[i], lanes[i % 16]);
    float scale = 1.0f / std::sqrt(reduce16(lanes) / (float)dim + eps);
    for (int i = 0; i < dim; ++i) out[(size_t)r * dim + i] = (xr[i] * scale) * gain[i];
  }
}

}  // namespace kvt
