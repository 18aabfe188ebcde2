// max_j |x[j]| over n floats (n a multiple of 8), as eight lane maxima and then
// their max, in GCC vector types so that it is one vmaxps-style select per 8
// values in every clone (wide-clones.h) that inlines it: GCC will not reorder a
// scalar float max chain, which left this loop scalar and a third of the time
// of the Q8 activation quantizers.
//
//   absmax_f32(x[n]) = the value of: m = 0; for j: m = |x_j| > m ? |x_j| : m
//
// Same value as that one chain for every input: max is exact and order-free,
// |x| has no −0, and a NaN is skipped either way (NaN > m is false).
#pragma once
#include <cstdint>
#include <cstring>

namespace kvt {

__attribute__((always_inline)) inline float absmax_f32(const float* x, int n) {
  typedef float v8f __attribute__((vector_size(32)));
  typedef int32_t v8i __attribute__((vector_size(32)));
  v8f m = {};
  for (int j = 0; j < n; j += 8) {
    v8f v;
    std::memcpy(&v, x + j, sizeof v);
    v = (v8f)((v8i)v & 0x7fffffff);
    m = v > m ? v : m;
  }
  float amax = 0.0f;
  for (int l = 0; l < 8; ++l) amax = m[l] > amax ? m[l] : amax;
  return amax;
}

}  // namespace kvt
