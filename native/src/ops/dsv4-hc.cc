// ops/dsv4-hc.h. The loops over i carry no reduction, so they vectorize with
// each element's f64 order unchanged.
#include "dsv4-hc.h"

#include <vector>

#include "wide-clones.h"

namespace kvt {

KVT_WIDE_CLONES void dsv4_hc_collapse(float* X, const float* H, const float* pre, int T, int hc, int d) {
  for (int t = 0; t < T; ++t) {
    float* x = X + (size_t)t * d;
    for (int i = 0; i < d; ++i) x[i] = 0.0f;
    for (int h = 0; h < hc; ++h) {
      const float* hr = H + ((size_t)t * hc + h) * d;
      const double p = pre[(size_t)t * hc + h];
      for (int i = 0; i < d; ++i) x[i] = (float)((double)x[i] + (double)hr[i] * p);
    }
  }
}

KVT_WIDE_CLONES void dsv4_hc_expand(float* out, const float* Y, const float* H, const float* post, const float* comb, int T, int hc, int d) {
  // i innermost with an f64 row accumulator: each element still sums post then src = 0, 1, … in order
  std::vector<double> v((size_t)d);
  for (int t = 0; t < T; ++t) {
    const float* y = Y + (size_t)t * d;
    const float* ht = H + (size_t)t * hc * d;
    const float* ct = comb + (size_t)t * hc * hc;
    for (int dst = 0; dst < hc; ++dst) {
      const double po = post[(size_t)t * hc + dst];
      for (int i = 0; i < d; ++i) v[i] = (double)y[i] * po;
      for (int src = 0; src < hc; ++src) {
        const float* hs = ht + (size_t)src * d;
        const double c = ct[dst + hc * src];
        for (int i = 0; i < d; ++i) v[i] += (double)hs[i] * c;
      }
      float* o = out + ((size_t)t * hc + dst) * d;
      for (int i = 0; i < d; ++i) o[i] = (float)v[i];
    }
  }
}

}  // namespace kvt
