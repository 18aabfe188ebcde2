// dsv4_rmsnorm_rows (see dsv4-rmsnorm.h). A row's f64 sum is one dependent
// chain (latency-bound); four rows' chains interleaved keep the adder busy
// without reordering any of them.
#include <cmath>

#include "dsv4-rmsnorm.h"
#include "wide-clones.h"

namespace kvt {
namespace {

constexpr int kRows = 4;

KVT_WIDE_CLONES void scale_row(float* o, const float* xr, const float* w, int n, double scale) {
  if (w)
    for (int i = 0; i < n; ++i) o[i] = (float)((double)xr[i] * scale * (double)w[i]);
  else
    for (int i = 0; i < n; ++i) o[i] = (float)((double)xr[i] * scale);
}

void rows(float* out, const float* x, const float* w, int t0, int t1, int n, double eps) {
  int t = t0;
  for (; t + kRows <= t1; t += kRows) {
    double ss[kRows] = {};
    const float* xr = x + (size_t)t * n;
    for (int i = 0; i < n; ++i)
      for (int r = 0; r < kRows; ++r) {
        const double v = xr[(size_t)r * n + i];
        ss[r] += v * v;
      }
    for (int r = 0; r < kRows; ++r) {
      const double scale = (float)(1.0 / std::sqrt((double)(float)(ss[r] / n) + eps));
      scale_row(out + (size_t)(t + r) * n, xr + (size_t)r * n, w, n, scale);
    }
  }
  for (; t < t1; ++t) {
    const float* xr = x + (size_t)t * n;
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += (double)xr[i] * (double)xr[i];
    scale_row(out + (size_t)t * n, xr, w, n, (float)(1.0 / std::sqrt((double)(float)(ss / n) + eps)));
  }
}

}  // namespace

void dsv4_rmsnorm_rows(float* out, const float* x, const float* w, int T, int n, double eps, ThreadPool& pool) {
  // rows in multiples of kRows per chunk; small calls (decode) stay on the caller
  const size_t min_rows = n >= 1024 ? 8 : 32;
  parallel_for(pool, (size_t)T, [&](size_t b, size_t e) { rows(out, x, w, (int)b, (int)e, n, eps); }, min_rows);
}

}  // namespace kvt
