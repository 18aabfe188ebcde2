// RMSNorm, per ISA.  out[rows][dim] = x · (1/sqrt(Σx²/dim + eps)) · gain[dim]
// Σx² in lane16 order (common.h), so all ISAs agree with rmsnorm_ref.
#include "../kernels.h"
#include "../simd/v16.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

static void rmsnorm_row(float* out, const float* x, const float* gain, int dim, float eps) {
  V16 acc = zero();
  int i = 0;
  for (; i + 16 <= dim; i += 16) {
    V16 v = load(x + i);
    acc = fma(v, v, acc);
  }
  if (i < dim) {
    V16 v = load_n(x + i, dim - i);
    acc = fma(v, v, acc);
  }
  float scale = 1.0f / std::sqrt(reduce_sum(acc) / (float)dim + eps);
  V16 s = set1(scale);
  for (i = 0; i + 16 <= dim; i += 16) store(out + i, mul(mul(load(x + i), s), load(gain + i)));
  if (i < dim) store_n(out + i, mul(mul(load_n(x + i, dim - i), s), load_n(gain + i, dim - i)), dim - i);
}

void rmsnorm(float* out, const float* x, const float* gain, int rows, int dim, float eps, ThreadPool& pool) {
  parallel_for(pool, (size_t)rows, [&](size_t b, size_t e) {
    for (size_t r = b; r < e; ++r) rmsnorm_row(out + r * dim, x + r * dim, gain, dim, eps);
  }, (size_t)(1 + 32768 / (dim > 0 ? dim : 1)));
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
