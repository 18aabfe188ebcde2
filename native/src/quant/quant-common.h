// Scalar helpers shared by the quantizers (internal to native/src/quant).
#pragma once
#include <cmath>
#include <cstdint>
#include <cstring>

#include "../common.h"

namespace kvt {
namespace quant {

// ggml's GROUP_MAX_EPS: a group whose largest |x| is below it quantizes to zeros.
constexpr float kGroupMaxEps = 1e-15f;

// Round to nearest, ties to even, by adding 1.5·2^23 and reading the mantissa:
// the exact rounding ggml's k-quants use (valid for |v| <= 2^22 - 1; beyond
// that it returns the same wrapped value ggml's does).
inline int nearest_int(float v) {
  float t = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &t, 4);
  return (i & 0x007fffff) - 0x00400000;
}

inline float half(uint16_t h) { return f16_to_f32(h); }
inline uint16_t to_half(float f) { return f32_to_f16(f); }

template <typename T>
inline T imin(T a, T b) { return a < b ? a : b; }
template <typename T>
inline T imax(T a, T b) { return a > b ? a : b; }

// The value of largest magnitude in x[0..n), the first one on ties (0 when all
// are 0); *amax, when given, gets its magnitude. ggml's scan in every quantizer.
inline float signed_absmax(const float* x, int n, float* amax = nullptr) {
  float a = 0, max = 0;
  for (int i = 0; i < n; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > a) {
      a = ax;
      max = x[i];
    }
  }
  if (amax) *amax = a;
  return max;
}

// q2_K / q3_K 2-bit packing of L[0..n) (n a multiple of 128): byte l of the
// 32-byte quarter of each 128 values holds values l, l+32, l+64, l+96 at bits 0, 2, 4, 6.
template <typename T>
inline void pack_2bit_quarters(uint8_t* qs, const T* L, int n) {
  for (int j = 0; j < n; j += 128)
    for (int l = 0; l < 32; ++l)
      qs[j / 4 + l] = (uint8_t)(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
}

// Index of the level of the sorted `val` (n a power of two) nearest to x; a
// value on the midpoint of two levels takes the upper one. Compares 2x with
// the integer sum of neighbours, so the midpoint test is exact.
inline int best_index_int8(int n, const int8_t* val, float x) {
  const float x2 = x + x;
  int idx = 0;
  for (int step = n >> 1; step > 0; step >>= 1) {
    const int j = idx + step;
    if (x2 >= (float)(val[j - 1] + val[j])) idx = j;
  }
  return idx;
}

// A row of k values is k / kValues blocks, packed back to back with no
// alignment (so each is copied, never cast in place): `fill(x, blk)` makes one
// block from its kValues floats, `expand(blk, y)` writes them back.
template <typename Block, int kValues, typename Fill>
inline void quantize_blocks(const float* x, uint8_t* y, int64_t k, Fill fill) {
  for (int64_t b = 0; b < k / kValues; ++b) {
    Block blk;
    fill(x + b * kValues, blk);
    std::memcpy(y + b * sizeof blk, &blk, sizeof blk);
  }
}

template <typename Block, int kValues, typename Expand>
inline void dequantize_blocks(const uint8_t* x, float* y, int64_t k, Expand expand) {
  for (int64_t b = 0; b < k / kValues; ++b) {
    Block blk;
    std::memcpy(&blk, x + b * sizeof blk, sizeof blk);
    expand(blk, y + b * kValues);
  }
}

}  // namespace quant
}  // namespace kvt
