// Reference twin of ops/matmul.cc on the plain GGUF layout.
//   out [m][n] = x [m][k] · Wᵀ, W [n][k] (F32/F16/BF16 elements or Q8_0 blocks)
// Same operation order as the fast kernel: one fma chain over k, or for
// Q8_0 exact integer block dots and one fma per block.
#include <vector>

#include "../kernels.h"
#include "matmul-legacy.h"
#include "matmul-kquant.h"

namespace kvt {

void matmul_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m) {
  if (is_legacy_quant(dtype)) return matmul_legacy_ref(out, x, w, dtype, n, k, m);  // matmul-legacy-ref.cc
  if (is_kquant(dtype)) return matmul_kquant_ref(out, x, w, dtype, n, k, m);        // matmul-kquant-ref.cc
  const size_t row_bytes = gguf_row_bytes(dtype, k);
  if (dtype == Q8_0) {
    const int nb = k / kQ8Block;
    std::vector<int8_t> q((size_t)m * k);
    std::vector<float> d((size_t)m * nb);
    std::vector<int32_t> s((size_t)m * nb);
    quantize_rows_q8(Q8Rows{q.data(), d.data(), s.data()}, x, m, k);
    for (int r = 0; r < m; ++r)
      for (int j = 0; j < n; ++j) {
        const uint8_t* row = w + (size_t)j * row_bytes;
        float acc = 0.0f;
        for (int b = 0; b < nb; ++b) {
          const uint8_t* blk = row + (size_t)b * kQ8BlockBytes;
          uint16_t dh;
          std::memcpy(&dh, blk, 2);
          const int8_t* wq = reinterpret_cast<const int8_t*>(blk + 2);
          const int8_t* xq = q.data() + (size_t)r * k + (size_t)b * kQ8Block;
          int32_t isum = 0;
          for (int i = 0; i < kQ8Block; ++i) isum += (int32_t)wq[i] * (int32_t)xq[i];
          acc = std::fmaf(f16_to_f32(dh) * d[(size_t)r * nb + b], (float)isum, acc);
        }
        out[(size_t)r * n + j] = acc;
      }
    return;
  }
  for (int r = 0; r < m; ++r)
    for (int j = 0; j < n; ++j) {
      const uint8_t* row = w + (size_t)j * row_bytes;
      float acc = 0.0f;
      for (int i = 0; i < k; ++i) {
        float wv;
        if (dtype == F32) std::memcpy(&wv, row + (size_t)i * 4, 4);
        else {
          uint16_t h;
          std::memcpy(&h, row + (size_t)i * 2, 2);
          wv = dtype == F16 ? f16_to_f32(h) : bf16_to_f32(h);
        }
        acc = std::fmaf(x[(size_t)r * k + i], wv, acc);
      }
      out[(size_t)r * n + j] = acc;
    }
}

}  // namespace kvt
