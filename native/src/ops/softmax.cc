// Row softmax, per ISA, in place.  x[rows][cols]
// max → exp16(x − max) → Σ in lane16 order → × (1/Σ).
#include "../kernels.h"
#include "../simd/v16.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

static void softmax_row(float* x, int n) {
  V16 mx = set1(-3.402823466e38f);
  int i = 0;
  for (; i + 16 <= n; i += 16) mx = max(mx, load(x + i));
  float m = reduce_max(mx);
  for (; i < n; ++i) m = x[i] > m ? x[i] : m;
  V16 vm = set1(m);
  V16 acc = zero();
  for (i = 0; i + 16 <= n; i += 16) {
    V16 e = exp16(sub(load(x + i), vm));
    store(x + i, e);
    acc = add(acc, e);
  }
  if (i < n) {
    // masked tail: lanes past n add exactly 0
    V16 e = exp16(sub(load_n(x + i, n - i), vm));
    float tmp[16];
    store(tmp, e);
    for (int j = n - i; j < 16; ++j) tmp[j] = 0.0f;
    e = load(tmp);
    store_n(x + i, e, n - i);
    acc = add(acc, e);
  }
  V16 inv = set1(1.0f / reduce_sum(acc));
  for (i = 0; i + 16 <= n; i += 16) store(x + i, mul(load(x + i), inv));
  if (i < n) store_n(x + i, mul(load_n(x + i, n - i), inv), n - i);
}

void softmax(float* x, int rows, int cols, ThreadPool& pool) {
  parallel_for(pool, (size_t)rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) softmax_row(x + r * cols, cols);
  }, (size_t)(1 + 16384 / (cols > 0 ? cols : 1)));
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
