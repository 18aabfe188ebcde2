// Reference twin of ops/matmul-legacy.cc on the plain GGUF layout.
//   out [m][n] = x [m][k] · Wᵀ, W [n][k] of Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS blocks
// x is quantized as llama.cpp does for these weights: per 32 by
// quantize_rows_q8 with dx and sx = dx·Σq rounded to f16 (ggml_q8_scales), or
// for IQ4_XS per 256 by quantize_rows_q8k_ggml. Per scale block, in this order:
//   isum = Σ value_i · q_i       exact integers; value = q−8, q−16, q or L[q];
//                                IQ4_XS: Σ over the 8 sub-blocks of ls · Σ L[q]·q
//   acc  = fma(d·dx, isum, acc)
//   acc  = fma(m, sx, acc)       Q4_1 / Q5_1 only
#include <vector>

#include "matmul-legacy.h"

namespace kvt {

static int code_value(int dtype, uint8_t q) {
  if (dtype == IQ4_NL || dtype == IQ4_XS) return kIq4Values[q];
  return (int)q - legacy_code_offset(dtype);
}

void matmul_legacy_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m) {
  const BlockGeometry geo = block_geometry(dtype);
  const int nsb = k / geo.elems, nb = k / kQK;  // scale blocks, 32-blocks per row
  const size_t row_bytes = (size_t)nsb * geo.bytes;
  std::vector<int8_t> q((size_t)m * k);
  std::vector<float> dx((size_t)m * nsb);
  std::vector<int32_t> sx((size_t)m * nb);
  std::vector<float> sxf((size_t)m * nb);
  if (dtype == IQ4_XS) {
    quantize_rows_q8k_ggml(Q8Rows{q.data(), dx.data(), sx.data()}, x, m, k);
  } else {
    quantize_rows_q8(Q8Rows{q.data(), dx.data(), sx.data()}, x, m, k);
    ggml_q8_scales(dx.data(), sxf.data(), sx.data(), sxf.size());
  }
  std::vector<uint8_t> codes(k);
  std::vector<int32_t> ls(nb, 1);  // IQ4_XS sub-block scales − 32; 1 for the others
  std::vector<float> dw(nsb), mw(nsb);
  for (int j = 0; j < n; ++j) {
    const uint8_t* row = w + (size_t)j * row_bytes;
    for (int b = 0; b < nsb; ++b) {  // decode row j once: codes, scales, mins
      const uint8_t* blk = row + (size_t)b * geo.bytes;
      uint16_t dh, mh;
      if (dtype == IQ4_XS) {
        int8_t l[kQKK / kQK];
        iq4xs_block_codes(blk, codes.data() + (size_t)b * kQKK, &dh, l);
        for (int ib = 0; ib < kQKK / kQK; ++ib) ls[b * 8 + ib] = l[ib];
        dw[b] = f16_to_f32(dh);
      } else {
        legacy_block_codes(dtype, blk, codes.data() + (size_t)b * kQK, &dh, &mh);
        dw[b] = f16_to_f32(dh);
        mw[b] = f16_to_f32(mh);
      }
    }
    const bool has_min = dtype == Q4_1 || dtype == Q5_1;
    const int sub = geo.elems / kQK;
    for (int r = 0; r < m; ++r) {
      float acc = 0.0f;
      for (int b = 0; b < nsb; ++b) {
        int32_t isum = 0;
        for (int c = b * sub; c < (b + 1) * sub; ++c) {
          const int8_t* xq = q.data() + (size_t)r * k + (size_t)c * kQK;
          int32_t s = 0;
          for (int i = 0; i < kQK; ++i) s += code_value(dtype, codes[(size_t)c * kQK + i]) * (int32_t)xq[i];
          isum += ls[c] * s;
        }
        const size_t bi = (size_t)r * nsb + b;
        acc = std::fmaf(dw[b] * dx[bi], (float)isum, acc);
        if (has_min) acc = std::fmaf(mw[b], sxf[bi], acc);
      }
      out[(size_t)r * n + j] = acc;
    }
  }
}

}  // namespace kvt
