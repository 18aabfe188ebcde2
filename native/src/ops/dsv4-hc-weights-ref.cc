// Reference twin of dsv4_hc_weights (see dsv4-hc-weights.h): one thread, row by row,
// the TypeScript hcWeights line for line.
#include <cmath>

#include "dsv4-hc-weights.h"

namespace kvt {
namespace {

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

}  // namespace

void dsv4_hc_weights_row(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int t, int hc,
                         double eps, int iters, bool with_comb) {
  const int n_mix = with_comb ? (2 + hc) * hc : hc;
  const float* m = mixes + (size_t)t * n_mix;
  float* pr = pre + (size_t)t * hc;
  for (int h = 0; h < hc; ++h) pr[h] = (float)(sigmoid((double)m[h] * scale[0] + base[h]) + eps);
  if (!with_comb) return;
  float* po = post + (size_t)t * hc;
  for (int h = 0; h < hc; ++h) po[h] = (float)(2.0 * sigmoid((double)m[hc + h] * scale[1] + base[hc + h]));
  float* c = comb + (size_t)t * hc * hc;
  for (int src = 0; src < hc; ++src) {
    double max = -INFINITY;
    for (int dst = 0; dst < hc; ++dst) {
      const int idx = dst + hc * src;
      const double v = (double)m[2 * hc + idx] * scale[2] + base[2 * hc + idx];
      c[idx] = (float)v;
      if (v > max) max = v;
    }
    double sum = 0;
    for (int dst = 0; dst < hc; ++dst) {
      const int idx = dst + hc * src;
      c[idx] = (float)std::exp((double)c[idx] - max);
      sum += c[idx];
    }
    for (int dst = 0; dst < hc; ++dst) c[dst + hc * src] = (float)((double)c[dst + hc * src] / sum + eps);
  }
  auto norm_cols = [&] {
    for (int dst = 0; dst < hc; ++dst) {
      double s = eps;
      for (int src = 0; src < hc; ++src) s += c[dst + hc * src];
      for (int src = 0; src < hc; ++src) c[dst + hc * src] = (float)((double)c[dst + hc * src] / s);
    }
  };
  auto norm_rows = [&] {
    for (int src = 0; src < hc; ++src) {
      double s = eps;
      for (int dst = 0; dst < hc; ++dst) s += c[dst + hc * src];
      for (int dst = 0; dst < hc; ++dst) c[dst + hc * src] = (float)((double)c[dst + hc * src] / s);
    }
  };
  norm_cols();
  for (int i = 1; i < iters; ++i) {
    norm_rows();
    norm_cols();
  }
}

void dsv4_hc_weights_ref(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int T, int hc,
                         double eps, int iters, bool with_comb) {
  for (int t = 0; t < T; ++t) dsv4_hc_weights_row(pre, post, comb, mixes, scale, base, t, hc, eps, iters, with_comb);
}

}  // namespace kvt
