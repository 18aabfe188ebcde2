// Reference twin of dsv4_moe_combine (see dsv4-moe-combine.h): one thread, element by element.
#include "dsv4-moe-combine.h"

namespace kvt {

void dsv4_moe_combine_ref(float* out, const float* y, const float* w, const float* sy, int T, int K, int d) {
  for (int t = 0; t < T; ++t)
    for (int i = 0; i < d; ++i) {
      float o = 0.0f;
      for (int k = 0; k < K; ++k) o = (float)((double)o + (double)y[((size_t)t * K + k) * d + i] * (double)w[(size_t)t * K + k]);
      out[(size_t)t * d + i] = (float)((double)o + (double)sy[(size_t)t * d + i]);
    }
}

}  // namespace kvt
