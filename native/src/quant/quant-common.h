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

}  // namespace quant
}  // namespace kvt
