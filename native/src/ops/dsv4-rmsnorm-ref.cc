// Reference twin of dsv4_rmsnorm_rows (see dsv4-rmsnorm.h): one thread, row by row.
#include <cmath>

#include "dsv4-rmsnorm.h"

namespace kvt {

void dsv4_rmsnorm_rows_ref(float* out, const float* x, const float* w, int T, int n, double eps) {
  for (int t = 0; t < T; ++t) {
    const float* xr = x + (size_t)t * n;
    float* o = out + (size_t)t * n;
    double ss = 0;
    for (int i = 0; i < n; ++i) ss += (double)xr[i] * (double)xr[i];
    const double scale = (float)(1.0 / std::sqrt((double)(float)(ss / n) + eps));
    for (int i = 0; i < n; ++i) o[i] = w ? (float)((double)xr[i] * scale * (double)w[i]) : (float)((double)xr[i] * scale);
  }
}

}  // namespace kvt
