// Residual add, per ISA.  out[n] = a[n] + b[n]  (out may alias a or b)
#include "../kernels.h"
#include "../simd/v16.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

void add(float* out, const float* a, const float* b, size_t n, ThreadPool& pool) {
  parallel_for(pool, (n + 15) / 16, [&](size_t cb, size_t ce) {
    for (size_t c = cb; c < ce; ++c) {
      size_t i = c * 16;
      int len = (int)(n - i < 16 ? n - i : 16);
      store_n(out + i, simd::add(load_n(a + i, len), load_n(b + i, len)), len);
    }
  }, 4096);
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
