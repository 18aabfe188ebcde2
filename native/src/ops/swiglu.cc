// SwiGLU, per ISA.  out[n] = gate / (1 + exp(−gate)) · up
#include "../kernels.h"
#include "../simd/v16.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

void swiglu(float* out, const float* gate, const float* up, size_t n, ThreadPool& pool) {
  parallel_for(pool, (n + 15) / 16, [&](size_t b, size_t e) {
    const V16 one = set1(1.0f);
    for (size_t c = b; c < e; ++c) {
      size_t i = c * 16;
      int len = (int)(n - i < 16 ? n - i : 16);
      V16 g = load_n(gate + i, len);
      V16 s = div(g, add(one, exp16(sub(zero(), g))));
      store_n(out + i, mul(s, load_n(up + i, len)), len);
    }
  }, 2048);
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
