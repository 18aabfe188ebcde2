// The sampler's vector passes, per ISA (see sample-masked.h for the law).
//   sample_scan     x [n], mask → max, min and count over the allowed ids
//   sample_weights  → w [n] = exp_kvt((x − m)·inv_t) on allowed ids, 0 elsewhere;
//                     blocks [ceil(n/16)] = Σ round(w·2^40) per 16 ids, as an exact f64
// Lanes are ids 16b … 16b+15; a lane is live when its mask bit is set and its id < n.
// Each W ≤ 2^40, so a block's 16 weights sum exactly in f64 (< 2^44) in any order,
// and w is exp16 = exp_kvt lane for lane: the twin gets the same bits.
#include <cmath>

#include "../simd/v16.h"
#include "sample-masked.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

namespace {
// Live lanes of the 16 ids from i (i % 16 == 0).
inline uint32_t live16(const uint32_t* mask, int i, int n) {
  const uint32_t bits = mask ? (mask[i >> 5] >> (i & 16)) & 0xffffu : 0xffffu;
  const int left = n - i;
  return left >= 16 ? bits : bits & ((1u << left) - 1u);
}

inline V16 load_block(const float* x, int i, int n) { return n - i >= 16 ? load(x + i) : load_n(x + i, n - i); }

#if KVT_V16_AVX512
inline V16 select(uint32_t live, V16 a, V16 other) { return {_mm512_mask_mov_ps(other.v, (__mmask16)live, a.v)}; }
inline double block_weight_sum(V16 e) {
  const __m512 t = _mm512_mul_ps(e.v, _mm512_set1_ps(1099511627776.0f));
  const __m512d lo = _mm512_roundscale_pd(_mm512_cvtps_pd(_mm512_castps512_ps256(t)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  const __m512d hi = _mm512_roundscale_pd(_mm512_cvtps_pd(_mm512_extractf32x8_ps(t, 1)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  return _mm512_reduce_add_pd(_mm512_add_pd(lo, hi));
}
#elif KVT_V16_AVX2
inline __m256 lanes8(uint32_t b8) {
  const __m256i sel = _mm256_setr_epi32(1, 2, 4, 8, 16, 32, 64, 128);
  return _mm256_castsi256_ps(_mm256_cmpeq_epi32(_mm256_and_si256(_mm256_set1_epi32((int)b8), sel), sel));
}
inline V16 select(uint32_t live, V16 a, V16 other) {
  return {_mm256_blendv_ps(other.lo, a.lo, lanes8(live & 0xff)), _mm256_blendv_ps(other.hi, a.hi, lanes8(live >> 8))};
}
inline __m256d round4(__m128 t) { return _mm256_round_pd(_mm256_cvtps_pd(t), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC); }
inline double block_weight_sum(V16 e) {
  const __m256 s = _mm256_set1_ps(1099511627776.0f);
  const __m256 lo = _mm256_mul_ps(e.lo, s), hi = _mm256_mul_ps(e.hi, s);
  __m256d acc = _mm256_add_pd(round4(_mm256_castps256_ps128(lo)), round4(_mm256_extractf128_ps(lo, 1)));
  acc = _mm256_add_pd(acc, _mm256_add_pd(round4(_mm256_castps256_ps128(hi)), round4(_mm256_extractf128_ps(hi, 1))));
  double t[4];
  _mm256_storeu_pd(t, acc);
  return (t[0] + t[1]) + (t[2] + t[3]);
}
#else
inline V16 select(uint32_t live, V16 a, V16 other) {
  V16 r;
  for (int j = 0; j < 16; ++j) r.v[j] = (live >> j) & 1 ? a.v[j] : other.v[j];
  return r;
}
inline double block_weight_sum(V16 e) {
  double s = 0;
  for (int j = 0; j < 16; ++j) s += (double)sample_weight(e.v[j]);
  return s;
}
#endif
}  // namespace

void sample_scan(const float* x, const uint32_t* mask, int n, float* mx, float* mn, int* count) {
  V16 hi = set1(-INFINITY), lo = set1(INFINITY);
  int c = 0;
  for (int i = 0; i < n; i += 16) {
    const uint32_t live = live16(mask, i, n);
    if (live == 0) continue;
    const V16 v = load_block(x, i, n);
    hi = max(hi, select(live, v, set1(-INFINITY)));
    lo = min(lo, select(live, v, set1(INFINITY)));
    c += __builtin_popcount(live);
  }
  *mx = reduce_max(hi);
  *mn = -reduce_max(sub(zero(), lo));
  *count = c;
}

void sample_weights(float* w, double* blocks, const float* x, const uint32_t* mask, int n, float m, float inv_t) {
  const V16 vm = set1(m), vt = set1(inv_t);
  for (int i = 0; i < n; i += 16) {
    const uint32_t live = live16(mask, i, n);
    V16 e = zero();
    if (live != 0) e = select(live, exp16(mul(sub(load_block(x, i, n), vm), vt)), zero());
    if (n - i >= 16) store(w + i, e);
    else store_n(w + i, e, n - i);
    blocks[i >> 4] = live != 0 ? block_weight_sum(e) : 0.0;
  }
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
