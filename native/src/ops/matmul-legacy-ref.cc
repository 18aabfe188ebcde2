// Reference twin of ops/matmul-legacy.cc on the plain GGUF layout.
//   out [m][n] = x [m][k] · Wᵀ, W [n][k] of Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS blocks
// x is quantized per 32-block by quantize_rows_q8 (int8 q), its scale dx and
// sx = dx·Σq rounded to f16 as ggml's block_q8_0/_q8_1 hold them
// (ggml_q8_scales); per 32-block, in this order:
//   isum = Σ value_i · q_i                           (exact integers; value = q−8, q−16, q or L[q])
//   acc  = fma(dw·dx, isum, acc)                      dw = d (IQ4_XS: d·ls, exact in f32)
//   acc  = fma(m, sx, acc)                            Q4_1 / Q5_1 only
#include <vector>

#include "matmul-legacy.h"

namespace kvt {

static int code_value(int dtype, uint8_t q) {
  if (dtype == IQ4_NL || dtype == IQ4_XS) return kIq4Values[q];
  return (int)q - legacy_code_offset(dtype);
}

void matmul_legacy_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m) {
  const BlockGeometry geo = block_geometry(dtype);
  const size_t row_bytes = (size_t)(k / geo.elems) * geo.bytes;
  const int nb = k / kQK;
  std::vector<int8_t> q((size_t)m * k);
  std::vector<float> dx((size_t)m * nb);
  std::vector<int32_t> sx((size_t)m * nb);
  quantize_rows_q8(Q8Rows{q.data(), dx.data(), sx.data()}, x, m, k);
  std::vector<float> sxf((size_t)m * nb);
  ggml_q8_scales(dx.data(), sxf.data(), sx.data(), sxf.size());
  std::vector<uint8_t> codes(k);
  std::vector<float> dw(nb), mw(nb);
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = w + (size_t)j * row_bytes;
    for (int b = 0; b < k / geo.elems; ++b) {  // decode row j once: codes, block scales, mins
      const uint8_t* blk = row + (size_t)b * geo.bytes;
      uint16_t dh, mh;
      if (dtype == IQ4_XS) {
        int8_t ls[kQKK / kQK];
        iq4xs_block_codes(blk, codes.data() + (size_t)b * kQKK, &dh, ls);
        for (int ib = 0; ib < kQKK / kQK; ++ib) dw[b * 8 + ib] = f16_to_f32(dh) * (float)ls[ib];
      } else {
        legacy_block_codes(dtype, blk, codes.data() + (size_t)b * kQK, &dh, &mh);
        dw[b] = f16_to_f32(dh);
        mw[b] = f16_to_f32(mh);
      }
    }
    const bool has_min = dtype == Q4_1 || dtype == Q5_1;
    for (int r = 0; r < m; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nb; ++b) {
        const int8_t* xq = q.data() + (size_t)r * k + (size_t)b * kQK;
        int32_t isum = 0;
        for (int i = 0; i < kQK; ++i) isum += code_value(dtype, codes[(size_t)b * kQK + i]) * (int32_t)xq[i];
        const size_t bi = (size_t)r * nb + b;
        acc = std::fmaf(dw[b] * dx[bi], (float)isum, acc);
        if (has_min) acc = std::fmaf(mw[b], sxf[bi], acc);
      }
      out[(size_t)r * n + j] = acc;
    }
  }
}

}  // namespace kvt
