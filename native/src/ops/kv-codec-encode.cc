// KV block codecs: the encoder (store side, runs in write-behind, off the
// request path) and the stored size. Formats: kv-codec.h. One implementation
// for every ISA: decoding is what a hit waits for, encoding is not.
#include <cmath>
#include <vector>

#include "kv-codec.h"

namespace kvt {

size_t kv_codec_bytes(const KvCodecShape& s) {
  size_t total = 0;
  for (int m = 0; m < s.matrices(); ++m) total += s.matrix_bytes(m);
  return total;
}

uint8_t f32_to_e4m3(float v) {
  uint8_t sign = std::signbit(v) ? 0x80 : 0;
  float a = std::fabs(v);
  if (a >= 448.0f) return sign | 0x7e;
  // lrintf: nearest even, inlined as cvtss2si (nearbyintf is a libm call that saves the FP environment).
  if (a < 0.015625f) return (uint8_t)(sign | (int)std::lrintf(a * 512.0f));  // subnormal step 2⁻⁹; 8 → min normal 0x08
  uint32_t bits;
  std::memcpy(&bits, &a, 4);
  int e = (int)(bits >> 23) - 127;                  // a = 2^e · m, m ∈ [1, 2)
  uint32_t inv_bits = (uint32_t)(127 - e) << 23;    // 2^−e, exact
  float inv;
  std::memcpy(&inv, &inv_bits, 4);
  int mant = (int)std::lrintf((a * inv - 1.0f) * 8.0f);
  int biased = e + 7;
  if (mant == 8) { mant = 0; ++biased; }
  if (biased > 15 || (biased == 15 && mant == 7)) return sign | 0x7e;
  return (uint8_t)(sign | (biased << 3) | mant);
}

namespace {

// f16 scale for amax/qmax, rounded up so no value clips; false when it overflows f16 or amax is not finite.
bool scale_for(float amax, float qmax, uint16_t* h, float* s) {
  if (!std::isfinite(amax)) return false;
  float want = amax / qmax;
  uint16_t bits = f32_to_f16(want);
  if ((bits & 0x7fff) >= 0x7c00) return false;
  if (f16_to_f32(bits) < want) ++bits;  // positive: the next f16 up
  if ((bits & 0x7fff) >= 0x7c00) return false;
  *h = bits;
  *s = f16_to_f32(bits);
  return true;
}

int clamp_round(float x, float inv_s, int q) {
  int v = (int)std::lrintf(x * inv_s);
  return v > q ? q : v < -q ? -q : v;
}

}  // namespace

bool kv_encode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s) {
  const int T = s.tokens, D = s.head_dim;
  const size_t n = s.matrix_values();
  const size_t max_scales = (size_t)(D > T * s.groups_per_row() ? D : T * s.groups_per_row());
  std::vector<float> x(n), scale(max_scales), inv(max_scales);
  const float qmax = s.codec == KV_CODEC_INT8 ? 127.0f : s.codec == KV_CODEC_FP8 ? 448.0f : 7.0f;
  uint8_t* out = dst;
  for (int m = 0; m < s.matrices(); ++m) {
    const uint8_t* in = src + (size_t)m * n * s.elem_bytes();
    for (size_t i = 0; i < n; ++i) {
      if (s.dtype == F32) std::memcpy(&x[i], in + i * 4, 4);
      else x[i] = f16_to_f32(load_u16(in + i * 2));
    }
    for (size_t i = 0; i < n; ++i)
      if (!std::isfinite(x[i])) return false;
    const bool grouped = s.per_group(m);
    const int G = kKvCodecInt4Group, groups = s.groups_per_row();
    const size_t n_scales = s.matrix_scales(m);
    for (size_t k = 0; k < n_scales; ++k) {
      float amax = 0.0f;
      if (grouped) {
        const int t = (int)(k / groups), g = (int)(k % groups);
        for (int d = g * G; d < D && d < (g + 1) * G; ++d) { const float a = std::fabs(x[(size_t)t * D + d]); amax = a > amax ? a : amax; }
      } else {
        for (int t = 0; t < T; ++t) { const float a = std::fabs(x[(size_t)t * D + k]); amax = a > amax ? a : amax; }
      }
      uint16_t h;
      if (!scale_for(amax, qmax, &h, &scale[k])) return false;
      inv[k] = scale[k] > 0.0f ? 1.0f / scale[k] : 0.0f;
      std::memcpy(out + k * 2, &h, 2);
    }
    uint8_t* codes = out + n_scales * 2;
    for (int t = 0; t < T; ++t) {
      for (int d = 0; d < D; ++d) {
        const size_t i = (size_t)t * D + d;
        const float r = inv[grouped ? (size_t)t * groups + d / G : (size_t)d];  // 1/scale, 0 for a zero scale
        if (s.codec == KV_CODEC_INT8) {
          codes[i] = (uint8_t)(int8_t)clamp_round(x[i], r, 127);
        } else if (s.codec == KV_CODEC_FP8) {
          codes[i] = f32_to_e4m3(x[i] * r);
        } else {
          const uint8_t nib = (uint8_t)(clamp_round(x[i], r, 7) + 8);
          if (i % 2 == 0) codes[i / 2] = nib;
          else codes[i / 2] |= (uint8_t)(nib << 4);
        }
      }
    }
    out += s.matrix_bytes(m);
  }
  return true;
}

}  // namespace kvt
