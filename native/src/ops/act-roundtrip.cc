// ops/act-roundtrip.h: ggml's activation quantization as f32, for the
// deepseek4 forward (the kernels' own activation rounding is not ggml's).
#include "act-roundtrip.h"

#include <cmath>
#include <cstdint>

#include "../common.h"
#include "absmax.h"
#include "wide-clones.h"

namespace kvt {

// Blocks [b0, b1) of 32 (one thread's share).
KVT_WIDE_CLONES static void q8_0_blocks(float* out, const float* x, size_t b0, size_t b1) {
  for (size_t b = b0 * 32; b < b1 * 32; b += 32) {
    // max |x_j| in vector lanes (absmax.h): the value of the twin's one compare chain
    const float amax = absmax_f32(x + b, 32);
    const float d = (float)((double)amax / 127.0);
    const float id = d != 0.0f ? (float)(1.0 / (double)d) : 0.0f;
    const float dh = f16_to_f32(f32_to_f16(d));
    for (int j = 0; j < 32; ++j) {
      // round half away from zero as integer ops (|v| ≤ 127, so the int is exact and the loop vectorizes;
      // std::round is a libm call); copysign keeps the −0 the twin gives for a small negative v
      const float v = x[b + j] * id;
      int32_t i = (int32_t)v;
      const float frac = v - (float)i;
      i += (frac >= 0.5f) - (frac <= -0.5f);
      out[b + j] = dh * std::copysign((float)i, v);
    }
  }
}

// Blocks [b0, b1) of 256.
KVT_WIDE_CLONES static void q8_k_blocks(float* out, const float* x, size_t b0, size_t b1) {
  for (size_t b = b0 * 256; b < b1 * 256; b += 256) {
    float amax = 0.0f, max = 0.0f;
    for (int j = 0; j < 256; ++j) {
      const float ax = std::fabs(x[b + j]);
      if (ax > amax) {
        amax = ax;
        max = x[b + j];
      }
    }
    if (amax == 0.0f) {
      for (int j = 0; j < 256; ++j) out[b + j] = 0.0f;
      continue;
    }
    const float iscale = (float)(-127.0 / (double)max);
    const float d = (float)(1.0 / (double)iscale);
    for (int j = 0; j < 256; ++j) {
      // + 1.5·2^23 rounds to the nearest integer, ties to even (f32 arithmetic)
      const float q = std::fmin(127.0f, (iscale * x[b + j] + 12582912.0f) - 12582912.0f);
      out[b + j] = d * q;
    }
  }
}

// Blocks are independent: split over the pool (whole blocks, ≥ 16 per chunk), same bits on any thread count.
void act_roundtrip_q8_0(float* out, const float* x, size_t n, ThreadPool& pool) {
  parallel_for(pool, n / 32, [&](size_t b, size_t e) { q8_0_blocks(out, x, b, e); }, 64);
}

void act_roundtrip_q8_k(float* out, const float* x, size_t n, ThreadPool& pool) {
  parallel_for(pool, n / 256, [&](size_t b, size_t e) { q8_k_blocks(out, x, b, e); }, 8);
}

}  // namespace kvt
