// Per-ISA primitives of the legacy-quant matmul (included by
// matmul-legacy.cc only, inside its KVT_ISA_NS): one 64-byte load of packed
// codes (16 rows × 4 columns × 2 nibble groups) → the dot operand of the ISA,
// and the int32 dot of 16 rows against 4 + 4 broadcast activation bytes.
//   AVX-512: codes as u8 (IQ4: level+128 via vpshufb), vpdpbusd; the dot
//            starts at −bias·s (bias 8 / 16 / 0 / 128) so it ends at Σ value·q;
//   AVX2:    maddubs of u8 codes (IQ4: abs/sign of the signed levels), same bias;
//   scalar:  the values themselves (bias 0).
#pragma once
#include <cstring>

#include "../simd/v16.h"
#include "matmul-legacy.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

constexpr bool is_iq4(int dt) { return dt == IQ4_NL || dt == IQ4_XS; }
constexpr bool has_min(int dt) { return dt == Q4_1 || dt == Q5_1; }
constexpr bool has_qh(int dt) { return dt == Q5_0 || dt == Q5_1; }

// IQ4 levels as the dot wants them: +128 (u8 for vpdpbusd) or signed (AVX2 abs/sign).
alignas(16) static const uint8_t kIq4U8[16] = {1, 24, 45, 63, 79, 93, 106, 118, 129, 141, 153, 166, 181, 197, 217, 241};
static_assert(kIq4Values[0] + 128 == 1 && kIq4Values[15] + 128 == 241, "kIq4U8 = kIq4Values + 128");

#if KVT_V16_AVX512
// 16 rows × 4 columns of codes, one u8 per value.
struct WV {
  __m512i v;
};
struct Raw {
  __m512i v;
};
struct VI {
  __m512i v;
};
template <int DT>
constexpr int bias() { return is_iq4(DT) ? 128 : legacy_code_offset(DT); }
inline Raw raw_load(const uint8_t* p) { return {_mm512_loadu_si512(p)}; }
// kHigh: the high nibbles (columns 16+4g..); qh bit g (low) or g+4 (high) becomes bit 4.
template <int DT, bool kHigh>
inline WV codes(Raw raw, Raw qh, int g) {
  const __m512i m4 = _mm512_set1_epi8(0x0F);
  __m512i c = kHigh ? _mm512_and_si512(_mm512_srli_epi16(raw.v, 4), m4) : _mm512_and_si512(raw.v, m4);
  if constexpr (has_qh(DT)) {
    __m512i b = kHigh ? _mm512_srli_epi16(qh.v, g) : _mm512_slli_epi16(qh.v, 4 - g);
    c = _mm512_ternarylogic_epi32(c, b, _mm512_set1_epi8(0x10), 0xF8);  // c | (b & 0x10)
  }
  if constexpr (is_iq4(DT)) c = _mm512_shuffle_epi8(_mm512_broadcast_i32x4(_mm_load_si128((const __m128i*)kIq4U8)), c);
  return {c};
}
inline __m512i bcast4(const int8_t* p) {
  int32_t t;
  std::memcpy(&t, p, 4);
  return _mm512_set1_epi32(t);
}
// the dot starts at −bias·s, so it ends at Σ value·q
inline VI vi_init(const int32_t* neg_bias_sum) { return {_mm512_set1_epi32(*neg_bias_sum)}; }
template <int DT>
inline VI dot8(VI acc, WV w0, __m512i x0, WV w1, __m512i x1) {
  return {_mm512_dpbusd_epi32(_mm512_dpbusd_epi32(acc.v, w0.v, x0), w1.v, x1)};
}
inline V16 vi_float(VI acc) { return {_mm512_cvtepi32_ps(acc.v)}; }
inline VI vi_load_i8(const int8_t* p) { return {_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p))}; }
inline VI vi_mul(VI a, VI b) { return {_mm512_mullo_epi32(a.v, b.v)}; }
inline VI vi_add(VI a, VI b) { return {_mm512_add_epi32(a.v, b.v)}; }

#elif KVT_V16_AVX2
struct WV {
  __m256i lo, hi;  // rows 0..7, rows 8..15
};
using Raw = WV;
struct VI {
  __m256i lo, hi;
};
template <int DT>
constexpr int bias() { return is_iq4(DT) ? 0 : legacy_code_offset(DT); }
inline Raw raw_load(const uint8_t* p) {
  return {_mm256_loadu_si256((const __m256i*)p), _mm256_loadu_si256((const __m256i*)(p + 32))};
}
template <int DT, bool kHigh>
inline __m256i codes_half(__m256i raw, __m256i qh, int g) {
  const __m256i m4 = _mm256_set1_epi8(0x0F);
  __m256i c = kHigh ? _mm256_and_si256(_mm256_srli_epi16(raw, 4), m4) : _mm256_and_si256(raw, m4);
  if constexpr (has_qh(DT)) {
    __m256i b = kHigh ? _mm256_srli_epi16(qh, g) : _mm256_slli_epi16(qh, 4 - g);
    c = _mm256_or_si256(c, _mm256_and_si256(b, _mm256_set1_epi8(0x10)));
  }
  if constexpr (is_iq4(DT)) {
    __m128i t = _mm_loadu_si128((const __m128i*)kIq4Values);
    c = _mm256_shuffle_epi8(_mm256_broadcastsi128_si256(t), c);
  }
  return c;
}
template <int DT, bool kHigh>
inline WV codes(Raw raw, Raw qh, int g) {
  return {codes_half<DT, kHigh>(raw.lo, qh.lo, g), codes_half<DT, kHigh>(raw.hi, qh.hi, g)};
}
inline __m256i bcast4(const int8_t* p) {
  int32_t t;
  std::memcpy(&t, p, 4);
  return _mm256_set1_epi32(t);
}
// u8 codes ≤ 31 (or |level| ≤ 127 via abs/sign) × |x| ≤ 127: int16 pairs never saturate.
template <int DT>
inline __m256i dot4_half(__m256i acc, __m256i w, __m256i x) {
  __m256i p16 = is_iq4(DT) ? _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w)) : _mm256_maddubs_epi16(w, x);
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
// Q4/Q5 codes: the int16 pair sums of two groups still fit (2·2·31·127 < 2^15), so one madd serves both.
template <int DT>
inline __m256i dot8_half(__m256i acc, __m256i w0, __m256i x0, __m256i w1, __m256i x1) {
  if constexpr (is_iq4(DT)) return dot4_half<DT>(dot4_half<DT>(acc, w0, x0), w1, x1);
  __m256i p16 = _mm256_add_epi16(_mm256_maddubs_epi16(w0, x0), _mm256_maddubs_epi16(w1, x1));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
template <int DT>
inline VI dot8(VI acc, WV w0, __m256i x0, WV w1, __m256i x1) {
  return {dot8_half<DT>(acc.lo, w0.lo, x0, w1.lo, x1), dot8_half<DT>(acc.hi, w0.hi, x0, w1.hi, x1)};
}
inline VI vi_init(const int32_t* neg_bias_sum) {
  __m256i v = _mm256_set1_epi32(*neg_bias_sum);
  return {v, v};
}
inline V16 vi_float(VI acc) { return {_mm256_cvtepi32_ps(acc.lo), _mm256_cvtepi32_ps(acc.hi)}; }
inline VI vi_load_i8(const int8_t* p) {
  __m128i v = _mm_loadu_si128((const __m128i*)p);
  return {_mm256_cvtepi8_epi32(v), _mm256_cvtepi8_epi32(_mm_srli_si128(v, 8))};
}
inline VI vi_mul(VI a, VI b) { return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)}; }
inline VI vi_add(VI a, VI b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }

#else
// scalar: the signed values themselves, byte (j, t) = row j, column 4g+t
struct WV {
  int8_t v[kQsGroupBytes];
};
struct Raw {
  const uint8_t* p;
};
struct VI {
  int32_t v[kPanel];
};
inline Raw raw_load(const uint8_t* p) { return {p}; }
template <int DT, bool kHigh>
inline WV codes(Raw raw, Raw qh, int g) {
  WV w;
  for (int i = 0; i < kQsGroupBytes; ++i) {
    int c = kHigh ? raw.p[i] >> 4 : raw.p[i] & 0xF;
    if constexpr (has_qh(DT)) c |= ((qh.p[i] >> (kHigh ? g + 4 : g)) & 1) << 4;
    w.v[i] = (int8_t)(is_iq4(DT) ? kIq4Values[c] : c - legacy_code_offset(DT));
  }
  return w;
}
inline const int8_t* bcast4(const int8_t* p) { return p; }
template <int DT>
inline VI dot8(VI acc, const WV& w0, const int8_t* x0, const WV& w1, const int8_t* x1) {
  for (int j = 0; j < kPanel; ++j)
    for (int t = 0; t < 4; ++t) acc.v[j] += (int32_t)w0.v[j * 4 + t] * x0[t] + (int32_t)w1.v[j * 4 + t] * x1[t];
  return acc;
}
template <int DT>
constexpr int bias() { return 0; }
inline VI vi_init(const int32_t*) { return VI{}; }
inline V16 vi_float(VI acc) {
  V16 r;
  for (int j = 0; j < kPanel; ++j) r.v[j] = (float)acc.v[j];
  return r;
}
inline VI vi_load_i8(const int8_t* p) {
  VI r;
  for (int j = 0; j < kPanel; ++j) r.v[j] = p[j];
  return r;
}
inline VI vi_mul(VI a, VI b) {
  for (int j = 0; j < kPanel; ++j) a.v[j] *= b.v[j];
  return a;
}
inline VI vi_add(VI a, VI b) {
  for (int j = 0; j < kPanel; ++j) a.v[j] += b.v[j];
  return a;
}
#endif

}  // namespace KVT_ISA_NS
}  // namespace kvt
