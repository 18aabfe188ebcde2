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

void min_max(const float* x, float* mn, float* mx) {
  float lo = FLT_MAX, hi = -FLT_MAX;
  for (int j = 0; j < kQK; ++j) {
    if (x[j] < lo) lo = x[j];
    if (x[j] > hi) hi = x[j];
  }
  *mn = lo;
  *mx = hi;
}

// The 5th bit of each of the 32 quants, element j at bit j.
void store_high_bits(uint8_t qh_out[4], const uint8_t* q5) {
  uint32_t qh = 0;
  for (int j = 0; j < kQK; ++j) qh |= (uint32_t)((q5[j] >> 4) & 1) << j;
  std::memcpy(qh_out, &qh, 4);
}

}  // namespace

void quantize_row_q4_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    BlockQ4_0 blk;
    const float d = signed_absmax(x, kQK) / -8;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = imin<int>(15, (int8_t)(x[j] * id + 8.5f));
      const uint8_t hi = imin<int>(15, (int8_t)(x[j + kQK / 2] * id + 8.5f));
      blk.qs[j] = (uint8_t)(lo | (hi << 4));
    }
    std::memcpy(y + b * sizeof blk, &blk, sizeof blk);
  }
}

void dequantize_row_q4_0(const uint8_t* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, y += kQK) {
    BlockQ4_0 blk;
    std::memcpy(&blk, x + b * sizeof blk, sizeof blk);
    const float d = half(blk.d);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (float)((blk.qs[j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = (float)((blk.qs[j] >> 4) - 8) * d;
    }
  }
}

void quantize_row_q4_1(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    BlockQ4_1 blk;
    float mn, mx;
    min_max(x, &mn, &mx);
    const float d = (mx - mn) / 15;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    blk.m = to_half(mn);
    for (int j = 0; j < kQK / 2; ++j) {
      const uint8_t lo = imin<int>(15, (int8_t)((x[j] - mn) * id + 0.5f));
      const uint8_t hi = imin<int>(15, (int8_t)((x[j + kQK / 2] - mn) * id + 0.5f));
      blk.qs[j] = (uint8_t)(lo | (hi << 4));
    }
    std::memcpy(y + b * sizeof blk, &blk, sizeof blk);
  }
}

void dequantize_row_q4_1(const uint8_t* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, y += kQK) {
    BlockQ4_1 blk;
    std::memcpy(&blk, x + b * sizeof blk, sizeof blk);
    const float d = half(blk.d), m = half(blk.m);
    for (int j = 0; j < kQK / 2; ++j) {
      y[j] = (float)(blk.qs[j] & 0x0F) * d + m;
      y[j + kQK / 2] = (float)(blk.qs[j] >> 4) * d + m;
    }
  }
}

void quantize_row_q5_0(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    BlockQ5_0 blk;
    const float d = signed_absmax(x, kQK) / -16;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = (uint8_t)imin<int>(31, (int8_t)(x[j] * id + 16.5f));
    for (int j = 0; j < kQK / 2; ++j) blk.qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
    store_high_bits(blk.qh, q);
    std::memcpy(y + b * sizeof blk, &blk, sizeof blk);
  }
}

void dequantize_row_q5_0(const uint8_t* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, y += kQK) {
    BlockQ5_0 blk;
    std::memcpy(&blk, x + b * sizeof blk, sizeof blk);
    const float d = half(blk.d);
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = (float)(lo - 16) * d;
      y[j + kQK / 2] = (float)(hi - 16) * d;
    }
  }
}

void quantize_row_q5_1(const float* x, uint8_t* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, x += kQK) {
    BlockQ5_1 blk;
    float mn, mx;
    min_max(x, &mn, &mx);
    const float d = (mx - mn) / 31;
    const float id = d != 0.0f ? 1.0f / d : 0.0f;
    blk.d = to_half(d);
    blk.m = to_half(mn);
    uint8_t q[kQK];
    for (int j = 0; j < kQK; ++j) q[j] = (uint8_t)((x[j] - mn) * id + 0.5f);
    for (int j = 0; j < kQK / 2; ++j) blk.qs[j] = (uint8_t)((q[j] & 0x0F) | ((q[j + kQK / 2] & 0x0F) << 4));
    store_high_bits(blk.qh, q);
    std::memcpy(y + b * sizeof blk, &blk, sizeof blk);
  }
}

void dequantize_row_q5_1(const uint8_t* x, float* y, int64_t k) {
  for (int64_t b = 0; b < k / kQK; ++b, y += kQK) {
    BlockQ5_1 blk;
    std::memcpy(&blk, x + b * sizeof blk, sizeof blk);
    const float d = half(blk.d), m = half(blk.m);
    uint32_t qh;
    std::memcpy(&qh, blk.qh, 4);
    for (int j = 0; j < kQK / 2; ++j) {
      const int lo = (blk.qs[j] & 0x0F) | (((qh >> j) & 1) << 4);
      const int hi = (blk.qs[j] >> 4) | (((qh >> (j + 16)) & 1) << 4);
      y[j] = (float)lo * d + m;
      y[j + kQK / 2] = (float)hi * d + m;
    }
  }
}

}  // namespace kvt
