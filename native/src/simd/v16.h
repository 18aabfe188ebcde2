// V16: 16 f32 lanes, one type per instruction set, selected by the flags of
// the translation unit that includes it (-mavx512f… / -mavx2 -mfma -mf16c /
// none). Every operation is IEEE-exact per lane (fma is fused in all three),
// so one kernel source compiled three times gives bit-identical results.
#pragma once
#include <cstdint>
#include <cstring>

#include "../common.h"

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VNNI__)
#define KVT_V16_AVX512 1
#include <immintrin.h>
#elif defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)
#define KVT_V16_AVX2 1
#include <immintrin.h>
#else
#define KVT_V16_SCALAR 1
#endif

namespace kvt {
namespace simd {

#if KVT_V16_AVX512 || KVT_V16_AVX2
// The 8 lanes of v folded into lane 0 in one fixed order (4 + 4, 2 + 2,
// 1 + 1), so a reduction gives the same bits on every run and in both wide
// types. The last step may use the packed form: lane 0 is what ss would give.
template <typename Op4>
inline float fold8(__m256 v, Op4 op) {
  __m128 r = op(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  r = op(r, _mm_movehl_ps(r, r));
  r = op(r, _mm_shuffle_ps(r, r, 1));
  return _mm_cvtss_f32(r);
}
inline float fold8_sum(__m256 v) {
  return fold8(v, [](__m128 a, __m128 b) { return _mm_add_ps(a, b); });
}
#endif

#if KVT_V16_AVX512
struct V16 {
  __m512 v;
};
inline V16 zero() { return {_mm512_setzero_ps()}; }
inline V16 set1(float a) { return {_mm512_set1_ps(a)}; }
inline V16 load(const float* p) { return {_mm512_loadu_ps(p)}; }
// *_n: the first n lanes (n may be >= 16: then all 16), the rest zero / untouched.
inline __mmask16 mask16(int n) { return n >= 16 ? (__mmask16)0xffff : (__mmask16)((1u << n) - 1); }
inline V16 load_n(const float* p, int n) { return {_mm512_maskz_loadu_ps(mask16(n), p)}; }
inline void store(float* p, V16 a) { _mm512_storeu_ps(p, a.v); }
inline void store_n(float* p, V16 a, int n) {
  _mm512_mask_storeu_ps(p, mask16(n), a.v);
}
inline V16 load_f16(const uint16_t* p) {
  return {_mm512_cvtph_ps(_mm256_loadu_si256((const __m256i*)p))};
}
inline V16 load_f16_n(const uint16_t* p, int n) {
  return {_mm512_cvtph_ps(_mm256_maskz_loadu_epi16(mask16(n), p))};
}
inline V16 load_bf16(const uint16_t* p) {
  __m512i w = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i*)p));
  return {_mm512_castsi512_ps(_mm512_slli_epi32(w, 16))};
}
inline V16 fma(V16 a, V16 b, V16 c) { return {_mm512_fmadd_ps(a.v, b.v, c.v)}; }
inline V16 add(V16 a, V16 b) { return {_mm512_add_ps(a.v, b.v)}; }
inline V16 sub(V16 a, V16 b) { return {_mm512_sub_ps(a.v, b.v)}; }
inline V16 mul(V16 a, V16 b) { return {_mm512_mul_ps(a.v, b.v)}; }
inline V16 div(V16 a, V16 b) { return {_mm512_div_ps(a.v, b.v)}; }
inline V16 max(V16 a, V16 b) { return {_mm512_max_ps(a.v, b.v)}; }
inline V16 min(V16 a, V16 b) { return {_mm512_min_ps(a.v, b.v)}; }
inline float reduce_sum(V16 a) {
  return fold8_sum(_mm256_add_ps(_mm512_castps512_ps256(a.v), _mm256_castpd_ps(_mm512_extractf64x4_pd(_mm512_castps_pd(a.v), 1))));
}
inline float reduce_max(V16 a) { return _mm512_reduce_max_ps(a.v); }
inline V16 round_even(V16 a) {
  return {_mm512_roundscale_ps(a.v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline V16 pow2i(V16 n) {  // 2^n for integral n in [-126, 127]
  __m512i e = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n.v), _mm512_set1_epi32(127)), 23);
  return {_mm512_castsi512_ps(e)};
}

#elif KVT_V16_AVX2
struct V16 {
  __m256 lo, hi;
};
inline __m256i mask8(int n) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(n), idx);
}
inline V16 zero() { return {_mm256_setzero_ps(), _mm256_setzero_ps()}; }
inline V16 set1(float a) { return {_mm256_set1_ps(a), _mm256_set1_ps(a)}; }
inline V16 load(const float* p) { return {_mm256_loadu_ps(p), _mm256_loadu_ps(p + 8)}; }
inline V16 load_n(const float* p, int n) {
  return {_mm256_maskload_ps(p, mask8(n)), _mm256_maskload_ps(p + 8, mask8(n - 8))};
}
inline void store(float* p, V16 a) {
  _mm256_storeu_ps(p, a.lo);
  _mm256_storeu_ps(p + 8, a.hi);
}
inline void store_n(float* p, V16 a, int n) {
  if (n >= 16) return store(p, a);
  _mm256_maskstore_ps(p, mask8(n), a.lo);
  _mm256_maskstore_ps(p + 8, mask8(n - 8), a.hi);
}
inline V16 load_f16(const uint16_t* p) {
  return {_mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)p)),
          _mm256_cvtph_ps(_mm_loadu_si128((const __m128i*)(p + 8)))};
}
inline V16 load_f16_n(const uint16_t* p, int n) {
  uint16_t tmp[16] = {0};
  std::memcpy(tmp, p, (size_t)(n < 16 ? n : 16) * 2);
  return load_f16(tmp);
}
inline V16 load_bf16(const uint16_t* p) {
  __m256i a = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)p));
  __m256i b = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i*)(p + 8)));
  return {_mm256_castsi256_ps(_mm256_slli_epi32(a, 16)), _mm256_castsi256_ps(_mm256_slli_epi32(b, 16))};
}
inline V16 fma(V16 a, V16 b, V16 c) {
  return {_mm256_fmadd_ps(a.lo, b.lo, c.lo), _mm256_fmadd_ps(a.hi, b.hi, c.hi)};
}
inline V16 add(V16 a, V16 b) { return {_mm256_add_ps(a.lo, b.lo), _mm256_add_ps(a.hi, b.hi)}; }
inline V16 sub(V16 a, V16 b) { return {_mm256_sub_ps(a.lo, b.lo), _mm256_sub_ps(a.hi, b.hi)}; }
inline V16 mul(V16 a, V16 b) { return {_mm256_mul_ps(a.lo, b.lo), _mm256_mul_ps(a.hi, b.hi)}; }
inline V16 div(V16 a, V16 b) { return {_mm256_div_ps(a.lo, b.lo), _mm256_div_ps(a.hi, b.hi)}; }
inline V16 max(V16 a, V16 b) { return {_mm256_max_ps(a.lo, b.lo), _mm256_max_ps(a.hi, b.hi)}; }
inline V16 min(V16 a, V16 b) { return {_mm256_min_ps(a.lo, b.lo), _mm256_min_ps(a.hi, b.hi)}; }
inline float reduce_sum(V16 a) { return fold8_sum(_mm256_add_ps(a.lo, a.hi)); }
inline float reduce_max(V16 a) {
  return fold8(_mm256_max_ps(a.lo, a.hi), [](__m128 x, __m128 y) { return _mm_max_ps(x, y); });
}
inline V16 round_even(V16 a) {
  return {_mm256_round_ps(a.lo, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC),
          _mm256_round_ps(a.hi, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC)};
}
inline V16 pow2i(V16 n) {
  const __m256i b = _mm256_set1_epi32(127);
  return {_mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.lo), b), 23)),
          _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n.hi), b), 23))};
}

#else  // scalar: 16 plain lanes
struct V16 {
  float v[16];
};
#define KVT_LANES(expr) \
  V16 r;                \
  for (int j = 0; j < 16; ++j) r.v[j] = (expr); \
  return r
inline V16 zero() { KVT_LANES(0.0f); }
inline V16 set1(float a) { KVT_LANES(a); }
inline V16 load(const float* p) { KVT_LANES(p[j]); }
inline V16 load_n(const float* p, int n) { KVT_LANES(j < n ? p[j] : 0.0f); }
inline void store(float* p, V16 a) { for (int j = 0; j < 16; ++j) p[j] = a.v[j]; }
inline void store_n(float* p, V16 a, int n) { for (int j = 0; j < 16 && j < n; ++j) p[j] = a.v[j]; }
inline V16 load_f16(const uint16_t* p) { KVT_LANES(f16_to_f32(p[j])); }
inline V16 load_f16_n(const uint16_t* p, int n) { KVT_LANES(j < n ? f16_to_f32(p[j]) : 0.0f); }
inline V16 load_bf16(const uint16_t* p) { KVT_LANES(bf16_to_f32(p[j])); }
inline V16 fma(V16 a, V16 b, V16 c) { KVT_LANES(std::fmaf(a.v[j], b.v[j], c.v[j])); }
inline V16 add(V16 a, V16 b) { KVT_LANES(a.v[j] + b.v[j]); }
inline V16 sub(V16 a, V16 b) { KVT_LANES(a.v[j] - b.v[j]); }
inline V16 mul(V16 a, V16 b) { KVT_LANES(a.v[j] * b.v[j]); }
inline V16 div(V16 a, V16 b) { KVT_LANES(a.v[j] / b.v[j]); }
// max/min with the x86 operand semantics (second operand when unordered)
inline V16 max(V16 a, V16 b) { KVT_LANES(a.v[j] > b.v[j] ? a.v[j] : b.v[j]); }
inline V16 min(V16 a, V16 b) { KVT_LANES(a.v[j] < b.v[j] ? a.v[j] : b.v[j]); }
inline float reduce_sum(V16 a) { return reduce16(a.v); }
inline float reduce_max(V16 a) {
  float m = a.v[0];
  for (int j = 1; j < 16; ++j) m = a.v[j] > m ? a.v[j] : m;
  return m;
}
inline V16 round_even(V16 a) { KVT_LANES(std::nearbyintf(a.v[j])); }
inline V16 pow2i(V16 n) {
  V16 r;
  for (int j = 0; j < 16; ++j) {
    int32_t e = ((int32_t)n.v[j] + 127) << 23;
    std::memcpy(&r.v[j], &e, 4);
  }
  return r;
}
#undef KVT_LANES
#endif

// exp_kvt (common.h) on 16 lanes, same operation order.
inline V16 exp16(V16 x) {
  x = min(max(x, set1(-87.0f)), set1(88.3f));
  V16 n = round_even(mul(x, set1(1.44269504088896341f)));
  V16 r = fma(n, set1(-0.693359375f), x);
  r = fma(n, set1(2.12194440e-4f), r);
  V16 y = set1(1.9875691500e-4f);
  y = fma(y, r, set1(1.3981999507e-3f));
  y = fma(y, r, set1(8.3334519073e-3f));
  y = fma(y, r, set1(4.1665795894e-2f));
  y = fma(y, r, set1(1.6666665459e-1f));
  y = fma(y, r, set1(5.0000001201e-1f));
  y = fma(y, mul(r, r), r);
  y = add(y, set1(1.0f));
  return mul(y, pow2i(n));
}

}  // namespace simd
}  // namespace kvt
