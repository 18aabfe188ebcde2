// Q4_0, Q4_1, Q5_0, Q5_1: one f16 scale (and min) per 32 values.
//   Q4_0 / Q5_0: d = (the value of largest |x|) / −8 (−16); q = trunc(x/d + 8.5 (16.5))
//   Q4_1 / Q5_1: d = (max − min) / 15 (31), m = min; q = trunc((x − min)/d + 0.5)
// The scale is computed in f32 and only rounded to f16 when stored, so the
// quants use the unrounded 1/d — as ggml's reference quantizers do.
#include <cfloat>

#include "blocks.h"
#include "quant-common.h"
#include "quant.h"

namespace kvt {

using namespace quant;

namespace {

// Q4_1 / Q5_1 (`steps` 15 / 31): d = (max − min) / steps and m = min, stored
// as f16; returns 1/d (0 for a constant block) and *mn, unrounded.
template <typename Block>
float set_scale_min(const float* x, int steps, Block& blk, float* mn) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  const float d = (hi - lo) / steps;
  blk.d = to_half(d);
  blk.m = to_half(lo);
  *mn = lo;
  return d != 0.0f ? 1.0f / d : 0.0f;
}

// The 5th bit of each of the 32 quants, element j at bit j.
void store_high_bits(uint8_t qh_out[4], const uint8_t* q5) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; ++j) qh |= (uint32_t)((q5[j] >> 4) & 1) << j;
  std::memcpy(qh_out, &qh, 4);
}

}  // namespace

void quantize_row_q4_0(const float* x, uint8_t* y, int64_t k) {
  quantize_blocks<BlockQ4_0, kQK>(x, y, k, [&](const float* x, BlockQ4_0& blk) {
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = imin<int>(15, (int8_t)(x[j] * id + 8.5f));
      const uint8_t hi = imin<int>(15, (int8_t)(x[j + kQK / 2] * id + 8.5f));
      blk.qs[j] = (uint8_t)(lo | (hi << 4));
    }
  });
}

void dequantize_row_q4_0(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ4_0, kQK>(x, y, k, [&](const BlockQ4_0& blk, float* y) {
    const float d = half(blk.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (float)((blk.qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = (float)((blk.qs[j] >> 4) - 8) * d;
    }
  });
}

void quantize_row_q4_1(const float* x, uint8_t* y, int64_t k) {
  quantize_blocks<BlockQ4_1, kQK>(x, y, k, [&](const float* x, BlockQ4_1& blk) {
    float mn;
    const float id = set_scale_min(x, 15, blk, &mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = imin<int>(15, (int8_t)((x[j] - mn) * id + 0.5f));
      const uint8_t hi = imin<int>(15, (int8_t)((x[j + kQK / 2] - mn) * id + 0.5f));
      blk.qs[j] = (uint8_t)(lo | (hi << 4));
    }
  });
}

void dequantize_row_q4_1(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ4_1, kQK>(x, y, k, [&](const BlockQ4_1& blk, float* y) {
    const float d = half(blk.d), m = half(blk.m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (float)(blk.qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = (float)(blk.qs[j] >> 4) * d + m;
    }
  });
}

void quantize_row_q5_0(const float* x, uint8_t* y, int64_t k) {
  quantize_blocks<BlockQ5_0, kQK>(x, y, k, [&](const float* x, BlockQ5_0& blk) {
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = (uint8_t)imin<int>(31, (int8_t)(x[j] * id + 16.5f));
    for (int j = 0; j < kQK / 2; ++j) blk.qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
    store_high_bits(blk.qh, q);
  });
}

void dequantize_row_q5_0(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ5_0, kQK>(x, y, k, [&](const BlockQ5_0& blk, float* y) {
    const float d = half(blk.d);
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = (float)(lo - 16) * d;
      y[j + kQK / 2] = (float)(hi - 16) * d;
    }
  });
}

void quantize_row_q5_1(const float* x, uint8_t* y, int64_t k) {
  quantize_blocks<BlockQ5_1, kQK>(x, y, k, [&](const float* x, BlockQ5_1& blk) {
    float mn;
    const float id = set_scale_min(x, 31, blk, &mn);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = (uint8_t)((x[j] - mn) * id + 0.5f);
    for (int j = 0; j < kQK / 2; ++j) blk.qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
    store_high_bits(blk.qh, q);
  });
}

void dequantize_row_q5_1(const uint8_t* x, float* y, int64_t k) {
  dequantize_blocks<BlockQ5_1, kQK>(x, y, k, [&](const BlockQ5_1& blk, float* y) {
    const float d = half(blk.d), m = half(blk.m);
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = (float)lo * d + m;
      y[j + kQK / 2] = (float)hi * d + m;
    }
  });
}

}  // namespace kvt
