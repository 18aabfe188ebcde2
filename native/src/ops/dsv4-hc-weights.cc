// dsv4_hc_weights (see dsv4-hc-weights.h): rows split over the pool's threads,
// each row by the _ref twin's row function (a row is ~2k dependent f64 ops of
// a 4×4 Sinkhorn: nothing to vectorize, only rows to spread).
#include "dsv4-hc-weights.h"

namespace kvt {

void dsv4_hc_weights(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int T, int hc,
                     double eps, int iters, bool with_comb, ThreadPool& pool) {
  parallel_for(pool, (size_t)T, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) dsv4_hc_weights_row(pre, post, comb, mixes, scale, base, (int)t, hc, eps, iters, with_comb);
  }, 32);
}

}  // namespace kvt
