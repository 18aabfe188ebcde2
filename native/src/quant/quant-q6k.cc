// Q6_K: 256 values = 16 groups of 16; x ≈ d·sc_j·(q − 32), q 6 bits (low
// nibble in ql, 2 high bits in qh), sc_j int8, d f16. In each half (128
// values) byte l of ql holds values l (low) and l + 64 (high nibble), byte
// l + 32 values l + 32 and l + 96; qh[l] holds the high bits of l, l + 32,
// l + 64, l + 96 at bits 0, 2, 4, 6.
// Quantize: per group make_qx_quants (x²-weighted), scales quantized against
// the one of largest magnitude (d = that/−128), values re-quantized.
#include "blocks.h"
#include "quant-common.h"
#include "quant-search.h"
#include "quant.h"

namespace kvt {

using namespace quant;

void quantize_row_q6_K(const float* x, uint8_t* y, int64_t k) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  quantize_blocks<BlockQ6_K, kQKK>(x, y, k, [&](const float* x, BlockQ6_K& blk) {
    for (int g = 0; g < kQKK / 16; ++g) scales[g] = make_qx_quants(16, 32, x + 16 * g, L + 16 * g);
    float max_abs_scale;
    const float max_scale = signed_absmax(scales, kQKK / 16, &max_abs_scale);
    if (max_abs_scale < kGroupMaxEps) {
      std::memset(&blk, 0, sizeof blk);
      blk.d = to_half(0.f);
      return;
    }
    const float iscale = -128.f / max_scale;
    blk.d = to_half(1 / iscale);
    for (int g = 0; g < kQKK / 16; ++g) blk.scales[g] = (int8_t)imin(127, nearest_int(iscale * scales[g]));
    for (int g = 0; g < kQKK / 16; ++g) {
      const float d = half(blk.d) * (float)blk.scales[g];
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i) L[16 * g + i] = (int8_t)(imax(-32, imin(31, nearest_int(x[16 * g + i] / d))) + 32);
    }
    uint8_t* ql = blk.ql;
    uint8_t* qh = blk.qh;
    for (int j = 0; j < kQKK; j += 128, ql += 64, qh += 32) {
      for (int l = 0; l < 32; ++l) {
        const int a = L[j + l], c = L[j + l + 32], e = L[j + l + 64], f = L[j + l + 96];
        ql[l] = (uint8_t)((a & 0xF) | ((e & 0xF) << 4));
        ql[l + 32] = (uint8_t)((c & 0xF) | ((f & 0xF) << 4));
        qh[l] = (uint8_t)((a >> 4) | ((c >> 4) << 2) | ((e >> 4) << 4) | ((f >> 4) << 6));
      }
    }
  });
}

void dequantize_row_q6_K(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ6_K, kQKK>(x, y, k, [&](const BlockQ6_K& blk, float* y) {
    const float d = half(blk.d);
    const uint8_t* ql = blk.ql;
    const uint8_t* qh = blk.qh;
    const int8_t* sc = blk.scales;
    for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * (float)sc[is] * (float)q1;
        y[l + 32] = d * (float)sc[is + 2] * (float)q2;
        y[l + 64] = d * (float)sc[is + 4] * (float)q3;
        y[l + 96] = d * (float)sc[is + 6] * (float)q4;
      }
    }
  });
}

}  // namespace kvt
