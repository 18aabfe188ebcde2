// Q3_K: 256 values = 16 groups of 16; x ≈ d·(sc_j − 32)·(q − 4), q ∈ 0..7
// (2 low bits in qs, the high bit in hmask), sc_j 6-bit in the 12 scale bytes:
// low nibbles in bytes 0..7 (groups 0..7 low, 8..15 high nibble), the 2 high
// bits of group j in byte 8 + j%4 at bit 2·(j/4).
// Quantize: per group make_q3_quants (x²-weighted descent), the scales
// quantized against the one of largest magnitude (d = that/−32), values
// re-quantized against the stored scales.
#include "blocks.h"
#include "quant-common.h"
#include "quant-search.h"
#include "quant.h"

namespace kvt {

using namespace quant;

namespace {

int q3_scale(const uint8_t* s, int j) {
  const int lo = j < 8 ? s[j] & 0xF : s[j - 8] >> 4;
  const int hi = (s[8 + j % 4] >> (2 * (j / 4))) & 3;
  return (lo | (hi << 4)) - 32;
}

}  // namespace

void quantize_row_q3_K(const float* x, uint8_t* y, int64_t k) {
  int8_t L[kQKK];
  float scales[kQKK / 16];
  quantize_blocks<BlockQ3_K, kQKK>(x, y, k, [&](const float* x, BlockQ3_K& blk) {
    for (int j = 0; j < kQKK / 16; ++j) scales[j] = make_q3_quants(16, 4, x + 16 * j, L + 16 * j);
    const float max_scale = signed_absmax(scales, kQKK / 16);
    std::memset(blk.scales, 0, sizeof blk.scales);
    if (max_scale != 0.0f) {
      const float iscale = -32.f / max_scale;
      for (int j = 0; j < kQKK / 16; ++j) {
        int8_t l = (int8_t)nearest_int(iscale * scales[j]);
        l = (int8_t)(imax<int>(-32, imin<int>(31, l)) + 32);
        if (j < 8) blk.scales[j] = (uint8_t)(l & 0xF);
        else blk.scales[j - 8] |= (uint8_t)((l & 0xF) << 4);
        l = (int8_t)(l >> 4);
        blk.scales[j % 4 + 8] |= (uint8_t)(l << (2 * (j / 4)));
      }
      blk.d = to_half(1 / iscale);
    } else {
      blk.d = to_half(0.f);
    }
    for (int j = 0; j < kQKK / 16; ++j) {
      const float d = half(blk.d) * (float)q3_scale(blk.scales, j);
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i) L[16 * j + i] = (int8_t)(imax(-4, imin(3, nearest_int(x[16 * j + i] / d))) + 4);
    }
    // high bit of value e goes to hmask[e % 32], bit e / 32
    std::memset(blk.hmask, 0, sizeof blk.hmask);
    for (int e = 0; e < kQKK; ++e)
      if (L[e] > 3) {
        blk.hmask[e % 32] |= (uint8_t)(1 << (e / 32));
        L[e] = (int8_t)(L[e] - 4);
      }
    pack_2bit_quarters(blk.qs, L, kQKK);
  });
}

void dequantize_row_q3_K(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ3_K, kQKK>(x, y, k, [&](const BlockQ3_K& blk, float* y) {
    const float d_all = half(blk.d);
    const uint8_t* q = blk.qs;
    int is = 0;
    uint8_t m = 1;
    for (int n = 0; n < kQKK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m = (uint8_t)(m << 1)) {
        for (int h = 0; h < 2; ++h) {
          const float dl = d_all * (float)q3_scale(blk.scales, is++);
          for (int l = 0; l < 16; ++l) {
            const int v = ((q[l + 16 * h] >> shift) & 3) - ((blk.hmask[l + 16 * h] & m) ? 0 : 4);
            *y++ = dl * (float)v;
          }
        }
      }
    }
  });
}

}  // namespace kvt
