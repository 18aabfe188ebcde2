// IQ4_NL and IQ4_XS: 4-bit indices into the 16 non-linear levels kIq4Values.
//   IQ4_NL: 32 values, x ≈ d·kIq4Values[q]
//   IQ4_XS: 256 values = 8 groups of 32, x ≈ d·(ls_j − 32)·kIq4Values[q], ls_j
//           6 bits (low nibble in scales_l[j/2] at 4·(j%2), high 2 bits in
//           scales_h at 2j)
// Quantize (ggml's quantize_iq4_nl / quantize_iq4_xs without an imatrix):
// per group of 32 a scale search weighted by x², 15 candidate scales around
// max/−127, the one with the best least-squares fit kept; values then
// re-indexed against the final (NL: f16-unrounded, XS: 6-bit quantized) scale.
#include "blocks.h"
#include "quant-common.h"
#include "quant.h"

namespace kvt {

using namespace quant;

namespace {

constexpr int kNTry = 7;
constexpr int kLevels = 16;

// Best scale for one group of 32; L gets the search's indices.
float iq4_group_scale(const float* xb, uint8_t* Lb) {
  float weight[32];
  for (int j = 0; j < 32; ++j) weight[j] = xb[j] * xb[j];
  float amax;
  const float max = signed_absmax(xb, 32, &amax);
  if (amax < kGroupMaxEps) {
    std::memset(Lb, 0, 32);
    return 0.0f;
  }
  float d = -max / (float)kIq4Values[0];
  float id = 1 / d;
  float sumqx = 0, sumq2 = 0;
  for (int j = 0; j < 32; ++j) {
    const int l = best_index_int8(kLevels, kIq4Values, id * xb[j]);
    Lb[j] = (uint8_t)l;
    const float q = (float)kIq4Values[l];
    sumqx += weight[j] * q * xb[j];
    sumq2 += weight[j] * q * q;
  }
  d = sumq2 > 0 ? sumqx / sumq2 : 0.f;
  float best = d * sumqx;
  for (int itry = -kNTry; itry <= kNTry; ++itry) {
    id = (float)(itry + kIq4Values[0]) / max;
    sumqx = sumq2 = 0;
    for (int j = 0; j < 32; ++j) {
      const float q = (float)kIq4Values[best_index_int8(kLevels, kIq4Values, id * xb[j])];
      sumqx += weight[j] * q * xb[j];
      sumq2 += weight[j] * q * q;
    }
    if (sumq2 > 0 && sumqx * sumqx > best * sumq2) {
      d = sumqx / sumq2;
      best = d * sumqx;
    }
  }
  return d;
}

// 32 indices → 16 bytes: byte j = L[j] | L[j + 16] << 4.
void pack_nibbles(uint8_t* q, const uint8_t* L) {
  for (int j = 0; j < 16; ++j) q[j] = (uint8_t)(L[j] | (L[16 + j] << 4));
}

}  // namespace

void quantize_row_iq4_nl(const float* x, uint8_t* y, int64_t k) {
  uint8_t L[32];
  quantize_blocks<BlockIq4Nl, kQK>(x, y, k, [&](const float* x, BlockIq4Nl& blk) {
    const float s = iq4_group_scale(x, L);
    blk.d = to_half(s);
    const float id = s != 0.0f ? 1 / s : 0;
    for (int j = 0; j < 32; ++j) L[j] = (uint8_t)best_index_int8(kLevels, kIq4Values, id * x[j]);
    pack_nibbles(blk.qs, L);
  });
}

void dequantize_row_iq4_nl(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockIq4Nl, kQK>(x, y, k, [&](const BlockIq4Nl& blk, float* y) {
    const float d = half(blk.d);
    for (int j = 0; j < 16; ++j) {
      y[j] = d * (float)kIq4Values[blk.qs[j] & 0xF];
      y[j + 16] = d * (float)kIq4Values[blk.qs[j] >> 4];
    }
  });
}

void quantize_row_iq4_xs(const float* x, uint8_t* y, int64_t k) {
  uint8_t L[kQKK];
  float scales[kQKK / 32];
  quantize_blocks<BlockIq4Xs, kQKK>(x, y, k, [&](const float* x, BlockIq4Xs& blk) {
    std::memset(&blk, 0, sizeof blk);
    for (int g = 0; g < kQKK / 32; ++g) scales[g] = iq4_group_scale(x + 32 * g, L + 32 * g);
    const float max_scale = signed_absmax(scales, kQKK / 32);
    const float d = -max_scale / 32;
    blk.d = to_half(d);
    const float id = d != 0.0f ? 1 / d : 0.f;
    for (int g = 0; g < kQKK / 32; ++g) {
      int l = imax(-32, imin(31, nearest_int(id * scales[g])));
      const float dl = d * (float)l;
      const float idl = dl != 0.0f ? 1 / dl : 0.f;
      for (int j = 0; j < 32; ++j) L[32 * g + j] = (uint8_t)best_index_int8(kLevels, kIq4Values, idl * x[32 * g + j]);
      l += 32;
      if (g % 2 == 0) blk.scales_l[g / 2] = (uint8_t)(l & 0xF);
      else blk.scales_l[g / 2] |= (uint8_t)((l & 0xF) << 4);
      blk.scales_h |= (uint16_t)((l >> 4) << (2 * g));
    }
    for (int g = 0; g < kQKK / 32; ++g) pack_nibbles(blk.qs + 16 * g, L + 32 * g);
  });
}

void dequantize_row_iq4_xs(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockIq4Xs, kQKK>(x, y, k, [&](const BlockIq4Xs& blk, float* y) {
    const float d = half(blk.d);
    for (int g = 0; g < kQKK / 32; ++g, y += 32) {
      const int ls = ((blk.scales_l[g / 2] >> (4 * (g % 2))) & 0xF) | (((blk.scales_h >> (2 * g)) & 3) << 4);
      const float dl = d * (float)(ls - 32);
      const uint8_t* qs = blk.qs + 16 * g;
      for (int j = 0; j < 16; ++j) {
        y[j] = dl * (float)kIq4Values[qs[j] & 0xF];
        y[j + 16] = dl * (float)kIq4Values[qs[j] >> 4];
      }
    }
  });
}

}  // namespace kvt
