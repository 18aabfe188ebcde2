// Q4_K and Q5_K: 256 values = 8 groups of 32; x ≈ d·sc_j·q − dmin·m_j with
// 6-bit sc_j, m_j packed in 12 bytes (k_scale_min), q 4 bits (Q5_K: plus a
// high bit in qh, value 64c + l + 32h → qh[l] bit 2c + h).
// Quantize: per group an asymmetric fit (make_qkx2_quants, squared error
// weighted by rms(group) + |x|), scales and mins quantized to 6 bits against
// their maxima, values re-quantized against the stored ones.
#include "blocks.h"
#include "quant-common.h"
#include "quant-search.h"
#include "quant.h"

namespace kvt {

using namespace quant;

namespace {

// Quants L[256] (0..nmax) and the packed scales/d/dmin of one super-block.
void quantize_kx_block(const float* x, int nmax, float rmin, float rdelta, int nstep, uint8_t* L, uint8_t scales_out[12],
                       uint16_t* d_out, uint16_t* dmin_out) {
  uint8_t Laux[32];
  float weights[32], mins[kQKK / 32], scales[kQKK / 32];
  float max_scale = 0, max_min = 0;
  for (int j = 0; j < kQKK / 32; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(32, nmax, x + 32 * j, weights, L + 32 * j, &mins[j], Laux, rmin, rdelta, nstep, false);
    if (scales[j] > max_scale) max_scale = scales[j];
    if (mins[j] > max_min) max_min = mins[j];
  }
  const float inv_scale = max_scale > 0 ? 63.f / max_scale : 0.f;
  const float inv_min = max_min > 0 ? 63.f / max_min : 0.f;
  for (int j = 0; j < kQKK / 32; ++j) {
    const uint8_t ls = imin<uint8_t>(63, (uint8_t)nearest_int(inv_scale * scales[j]));
    const uint8_t lm = imin<uint8_t>(63, (uint8_t)nearest_int(inv_min * mins[j]));
    if (j < 4) {
      scales_out[j] = ls;
      scales_out[j + 4] = lm;
    } else {
      scales_out[j + 4] = (uint8_t)((ls & 0xF) | ((lm & 0xF) << 4));
      scales_out[j - 4] |= (uint8_t)((ls >> 4) << 6);
      scales_out[j] |= (uint8_t)((lm >> 4) << 6);
    }
  }
  *d_out = to_half(max_scale / 63.f);
  *dmin_out = to_half(max_min / 63.f);
  for (int j = 0; j < kQKK / 32; ++j) {
    uint8_t sc, m;
    k_scale_min(j, scales_out, &sc, &m);
    const float d = half(*d_out) * (float)sc;
    if (d == 0.0f) continue;
    const float dm = half(*dmin_out) * (float)m;
    for (int i = 0; i < 32; ++i) L[32 * j + i] = (uint8_t)imax(0, imin(nmax, nearest_int((x[32 * j + i] + dm) / d)));
  }
}

}  // namespace

// Dequantization scale and min of the two 32-value sub-blocks 2c and 2c+1 of
// 64-value chunk c (Q4_K and Q5_K share the scale layout).
static void chunk_scales(const uint8_t* scales, int c, float d, float dmin, float* d1, float* m1, float* d2, float* m2) {
  uint8_t sc, m;
  k_scale_min(2 * c, scales, &sc, &m);
  *d1 = d * (float)sc;
  *m1 = dmin * (float)m;
  k_scale_min(2 * c + 1, scales, &sc, &m);
  *d2 = d * (float)sc;
  *m2 = dmin * (float)m;
}

void quantize_row_q4_K(const float* x, uint8_t* y, int64_t k) {
  uint8_t L[kQKK];
  quantize_blocks<BlockQ4_K, kQKK>(x, y, k, [&](const float* x, BlockQ4_K& blk) {
    quantize_kx_block(x, 15, -1.f, 0.1f, 20, L, blk.scales, &blk.d, &blk.dmin);
    // byte l of chunk c holds value 64c + l (low nibble) and 64c + 32 + l (high)
    for (int c = 0; c < kQKK / 64; ++c)
      for (int l = 0; l < 32; ++l) blk.qs[32 * c + l] = (uint8_t)(L[64 * c + l] | (L[64 * c + l + 32] << 4));
  });
}

void dequantize_row_q4_K(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ4_K, kQKK>(x, y, k, [&](const BlockQ4_K& blk, float* y) {
    const float d = half(blk.d), dmin = half(blk.dmin);
    for (int c = 0; c < kQKK / 64; ++c) {
      const uint8_t* q = blk.qs + 32 * c;
      float d1, m1, d2, m2;
      chunk_scales(blk.scales, c, d, dmin, &d1, &m1, &d2, &m2);
      for (int l = 0; l < 32; ++l) *y++ = d1 * (float)(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (float)(q[l] >> 4) - m2;
    }
  });
}

void quantize_row_q5_K(const float* x, uint8_t* y, int64_t k) {
  uint8_t L[kQKK];
  quantize_blocks<BlockQ5_K, kQKK>(x, y, k, [&](const float* x, BlockQ5_K& blk) {
    quantize_kx_block(x, 31, -0.5f, 0.1f, 15, L, blk.scales, &blk.d, &blk.dmin);
    std::memset(blk.qh, 0, sizeof blk.qh);
    for (int c = 0; c < kQKK / 64; ++c) {
      for (int l = 0; l < 32; ++l) {
        int l1 = L[64 * c + l], l2 = L[64 * c + l + 32];
        if (l1 > 15) {
          l1 -= 16;
          blk.qh[l] |= (uint8_t)(1 << (2 * c));
        }
        if (l2 > 15) {
          l2 -= 16;
          blk.qh[l] |= (uint8_t)(2 << (2 * c));
        }
        blk.qs[32 * c + l] = (uint8_t)(l1 | (l2 << 4));
      }
    }
  });
}

void dequantize_row_q5_K(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ5_K, kQKK>(x, y, k, [&](const BlockQ5_K& blk, float* y) {
    const float d = half(blk.d), dmin = half(blk.dmin);
    for (int c = 0; c < kQKK / 64; ++c) {
      const uint8_t* ql = blk.qs + 32 * c;
      const uint8_t u1 = (uint8_t)(1 << (2 * c)), u2 = (uint8_t)(2 << (2 * c));
      float d1, m1, d2, m2;
      chunk_scales(blk.scales, c, d, dmin, &d1, &m1, &d2, &m2);
      for (int l = 0; l < 32; ++l) *y++ = d1 * (float)((ql[l] & 0xF) + (blk.qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (float)((ql[l] >> 4) + (blk.qh[l] & u2 ? 16 : 0)) - m2;
    }
  });
}

}  // namespace kvt
