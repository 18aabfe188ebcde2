// dsv4_moe_combine (see dsv4-moe-combine.h): tokens over the pool's threads;
// i innermost (no reduction across i), so the lanes keep each element's order.
#include "dsv4-moe-combine.h"
#include "wide-clones.h"

namespace kvt {
namespace {

KVT_WIDE_CLONES void token(float* o, const float* y, const float* w, const float* sy, int K, int d) {
  for (int i = 0; i < d; ++i) o[i] = 0.0f;
  for (int k = 0; k < K; ++k) {
    const float* yk = y + (size_t)k * d;
    const double wk = w[k];
    for (int i = 0; i < d; ++i) o[i] = (float)((double)o[i] + (double)yk[i] * wk);
  }
  for (int i = 0; i < d; ++i) o[i] = (float)((double)o[i] + (double)sy[i]);
}

}  // namespace

void dsv4_moe_combine(float* out, const float* y, const float* w, const float* sy, int T, int K, int d, ThreadPool& pool) {
  parallel_for(pool, (size_t)T, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) token(out + t * d, y + t * K * d, w + t * K, sy + t * d, K, d);
  }, 32);
}

}  // namespace kvt
