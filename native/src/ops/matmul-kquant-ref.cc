// Reference twin of ops/matmul-kquant.cc on the plain GGUF layout:
//   out [m][n] = x [m][k] · Wᵀ, W [n][k] in Q2_K .. Q6_K super-blocks.
// Same numerics as the fast kernel (matmul-kquant.h): exact integer sums per
// super-block, then one fma (two with a min) per super-block in block order.
#include <vector>

#include "matmul-kquant.h"

namespace kvt {

void matmul_kquant_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m) {
  const KqSpec S = kq_spec(dtype);
  const int nsb = k / kQKK;
  const size_t row_bytes = kquant_row_bytes(dtype, k);
  std::vector<int8_t> q((size_t)m * k);
  std::vector<float> d((size_t)m * nsb);
  std::vector<int32_t> bsum((size_t)m * (k / 16));
  quantize_rows_q8k(Q8KRows{q.data(), d.data(), bsum.data()}, x, m, k);
  KqBlock blk;
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int b = 0; b < nsb; ++b) {
        kquant_block_codes(dtype, w + (size_t)j * row_bytes + (size_t)b * S.gguf_bytes, &blk);
        const int8_t* xq = q.data() + (size_t)r * k + (size_t)b * kQKK;
        int32_t isum = 0, imin = 0;
        for (int s = 0; s < S.nsub(); ++s) {
          int32_t dot = 0, xs = 0;
          for (int e = s * S.sub; e < (s + 1) * S.sub; ++e) {
            dot += (int32_t)blk.u[e] * xq[e];
            xs += xq[e];
          }
          isum += blk.s[s] * (dot - S.off * xs);
          imin += blk.m[s] * xs;
        }
        const float dx = d[(size_t)r * nsb + b];
        acc = std::fmaf(f16_to_f32(blk.d) * dx, (float)isum, acc);
        if (S.has_min) acc = std::fmaf(f16_to_f32(blk.dmin) * -dx, (float)imin, acc);
      }
      out[(size_t)r * n + j] = acc;
    }
}

}  // namespace kvt
