// ops/dsv4-hc.h. The loops over i carry no reduction, so they vectorize with
// each element's f64 order unchanged.
#include "dsv4-hc.h"

#include <vector>

#include "wide-clones.h"

namespace kvt {

// Rows [t0, t1) (one thread's share; rows are independent).
KVT_WIDE_CLONES static void collapse_rows(float* X, const float* H, const float* pre, int t0, int t1, int hc, int d) {
  for (int t = t0; t < t1; ++t) {
    float* x = X + (size_t)t * d;
    for (int i = 0; i < d; ++i) x[i] = 0.0f;
    for (int h = 0; h < hc; ++h) {
      const float* hr = H + ((size_t)t * hc + h) * d;
      const double p = pre[(size_t)t * hc + h];
      for (int i = 0; i < d; ++i) x[i] = (float)((double)x[i] + (double)hr[i] * p);
    }
  }
}

// Rows [t0, t1); v: an f64 scratch row of d.
KVT_WIDE_CLONES static void expand_rows(float* out, const float* Y, const float* H, const float* post, const float* comb, int t0, int t1, int hc, int d,
                                        double* v) {
  // i innermost with an f64 row accumulator: each element still sums post then src = 0, 1, … in order
  for (int t = t0; t < t1; ++t) {
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

// Rows split over the pool (≥ 4 per chunk): each row is computed whole on one thread, the same bits on any count.
void dsv4_hc_collapse(float* X, const float* H, const float* pre, int T, int hc, int d, ThreadPool& pool) {
  parallel_for(pool, (size_t)T, [&](size_t b, size_t e) { collapse_rows(X, H, pre, (int)b, (int)e, hc, d); }, 4);
}

void dsv4_hc_expand(float* out, const float* Y, const float* H, const float* post, const float* comb, int T, int hc, int d, ThreadPool& pool) {
  parallel_for(pool, (size_t)T, [&](size_t b, size_t e) {
    thread_local std::vector<double> v;
    v.resize((size_t)d);
    expand_rows(out, Y, H, post, comb, (int)b, (int)e, hc, d, v.data());
  }, 4);
}

}  // namespace kvt
