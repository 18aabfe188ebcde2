// Q2_K: 256 values = 16 groups of 16; x ≈ d·sc_j·q − dmin·m_j, q ∈ 0..3,
// sc_j and m_j 4-bit (low / high nibble of scales[j]), d and dmin f16.
// Quantize: per group an asymmetric fit (make_qkx2_quants, |error| weighted
// by |x|), the 16 scales and mins quantized against their maxima, then every
// value re-quantized against the stored (f16-rounded) scale and min.
#include "blocks.h"
#include "quant-common.h"
#include "quant-search.h"
#include "quant.h"

namespace kvt {

using namespace quant;

void quantize_row_q2_K(const float* x, uint8_t* y, int64_t k) {
  constexpr float kQ4Scale = 15.f;
  uint8_t L[kQKK], Laux[16];
  float weights[16], mins[kQKK / 16], scales[kQKK / 16];
  quantize_blocks<BlockQ2_K, kQKK>(x, y, k, [&](const float* x, BlockQ2_K& blk) {
    float max_scale = 0, max_min = 0;
    for (int j = 0; j < kQKK / 16; ++j) {
      for (int l = 0; l < 16; ++l) weights[l] = std::fabs(x[16 * j + l]);
      scales[j] = make_qkx2_quants(16, 3, x + 16 * j, weights, L + 16 * j, &mins[j], Laux, -0.5f, 0.1f, 15, true);
      if (scales[j] > max_scale) max_scale = scales[j];
      if (mins[j] > max_min) max_min = mins[j];
    }
    if (max_scale > 0) {
      const float iscale = kQ4Scale / max_scale;
      for (int j = 0; j < kQKK / 16; ++j) blk.scales[j] = (uint8_t)nearest_int(iscale * scales[j]);
      blk.d = to_half(max_scale / kQ4Scale);
    } else {
      for (int j = 0; j < kQKK / 16; ++j) blk.scales[j] = 0;
      blk.d = to_half(0.f);
    }
    if (max_min > 0) {
      const float iscale = kQ4Scale / max_min;
      for (int j = 0; j < kQKK / 16; ++j) blk.scales[j] |= (uint8_t)(nearest_int(iscale * mins[j]) << 4);
      blk.dmin = to_half(max_min / kQ4Scale);
    } else {
      blk.dmin = to_half(0.f);
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = half(blk.d) * (float)(blk.scales[j] & 0xF);
      if (d == 0.0f) continue;
      const float dm = half(blk.dmin) * (float)(blk.scales[j] >> 4);
      for (int i = 0; i < 16; ++i) L[16 * j + i] = (uint8_t)imax(0, imin(3, nearest_int((x[16 * j + i] + dm) / d)));
    }
    pack_2bit_quarters(blk.qs, L, kQKK);
  });
}

void dequantize_row_q2_K(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ2_K, kQKK>(x, y, k, [&](const BlockQ2_K& blk, float* y) {
    const float d = half(blk.d), dmin = half(blk.dmin);
    const uint8_t* q = blk.qs;
    int is = 0;
    for (int n = 0; n < kQKK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int h = 0; h < 2; ++h) {
          const uint8_t sc = blk.scales[is++];
          const float dl = d * (float)(sc & 0xF), ml = dmin * (float)(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * (float)((q[l + 16 * h] >> shift) & 3) - ml;
        }
      }
    }
  });
}

}  // namespace kvt
