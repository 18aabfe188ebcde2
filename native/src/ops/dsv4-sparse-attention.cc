// dsv4_sparse_attention (see dsv4-sparse-attention.h): (t, h) pairs split over
// the pool's threads, each computed whole by dsv4_sparse_attention_pair, so the
// result is the _ref twin's bit for bit.
#include <vector>

#include "dsv4-sparse-attention.h"

namespace kvt {

void dsv4_sparse_attention(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                           const float* sinks, int T, int H, int D, double scale, ThreadPool& pool) {
  parallel_for_dynamic(pool, (size_t)T * H, 4, [&](size_t b, size_t e) {
    thread_local std::vector<double> scratch;
    for (size_t it = b; it < e; ++it) {
      const int t = (int)(it / H);
      const int h = (int)(it % H);
      const size_t n = (size_t)(off[t + 1] - off[t]) + 1;
      if (scratch.size() < n) scratch.resize(n);
      dsv4_sparse_attention_pair(out, q, keys, idx, off, sinks, t, h, H, D, scale, scratch.data());
    }
  });
}

}  // namespace kvt
