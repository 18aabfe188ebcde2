// Per ISA: decoding a compressed KV block straight into page layout (formats
// in kv-codec.h). AVX-512 converts 16 codes a step, AVX2 8 (and the AVX-512
// library's tail): int8 sign-extended,
// e4m3 through its f16 bits (vcvtph2ps), int4 nibbles unpacked; one multiply
// by the scale; f16 pages stored by vcvtps2ph (nearest even). The scalar
// tail is kv_decode_ref's formula, so every path gives the same bits.
#include <vector>

#include "kv-codec.h"

#if defined(__AVX2__) && defined(__F16C__)
#include <immintrin.h>
#define KVT_CODEC_AVX2 1
#endif

namespace kvt {
namespace KVT_ISA_NS {
namespace {

template <int C>
inline float code_at(const uint8_t* codes, size_t i) {
  if (C == KV_CODEC_INT8) return (float)(int8_t)codes[i];
  if (C == KV_CODEC_FP8) return f16_to_f32(e4m3_to_f16_scaled(codes[i]));
  return (float)((i % 2 == 0 ? codes[i / 2] & 15 : codes[i / 2] >> 4) - 8);
}

template <bool F16>
inline void put(uint8_t* out, size_t j, float v) {
  if (F16) {
    const uint16_t h = f32_to_f16(v);
    std::memcpy(out + j * 2, &h, 2);
  } else {
    std::memcpy(out + j * 4, &v, 4);
  }
}

#if KVT_CODEC_AVX2 && defined(__AVX512F__) && defined(__AVX512BW__)
#define KVT_CODEC_AVX512 1
template <int C>
inline __m512 codes16(const uint8_t* codes, size_t i) {
  if (C == KV_CODEC_INT8) return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)(codes + i))));
  if (C == KV_CODEC_FP8) {
    const __m256i w = _mm256_cvtepu8_epi16(_mm_loadu_si128((const __m128i*)(codes + i)));
    const __m256i h = _mm256_or_si256(_mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x80)), 8),
                                      _mm256_slli_epi16(_mm256_and_si256(w, _mm256_set1_epi16(0x7f)), 7));
    return _mm512_cvtph_ps(h);
  }
  const __m128i x = _mm_loadl_epi64((const __m128i*)(codes + i / 2));  // i even: 16 nibbles
  const __m128i lo = _mm_and_si128(x, _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(15));
  const __m512i q = _mm512_sub_epi32(_mm512_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), _mm512_set1_epi32(8));
  return _mm512_cvtepi32_ps(q);
}
#endif

#if KVT_CODEC_AVX2
template <int C>
inline __m256 codes8(const uint8_t* codes, size_t i) {
  if (C == KV_CODEC_INT8) return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(codes + i))));
  if (C == KV_CODEC_FP8) {
    const __m128i w = _mm_cvtepu8_epi16(_mm_loadl_epi64((const __m128i*)(codes + i)));
    const __m128i h = _mm_or_si128(_mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x80)), 8),
                                   _mm_slli_epi16(_mm_and_si128(w, _mm_set1_epi16(0x7f)), 7));
    return _mm256_cvtph_ps(h);
  }
  uint32_t four;
  std::memcpy(&four, codes + i / 2, 4);  // i even: 8 nibbles
  const __m128i x = _mm_cvtsi32_si128((int)four);
  const __m128i lo = _mm_and_si128(x, _mm_set1_epi8(15));
  const __m128i hi = _mm_and_si128(_mm_srli_epi16(x, 4), _mm_set1_epi8(15));
  const __m256i q = _mm256_sub_epi32(_mm256_cvtepu8_epi32(_mm_unpacklo_epi8(lo, hi)), _mm256_set1_epi32(8));
  return _mm256_cvtepi32_ps(q);
}
#endif

// out[j] = code(i0 + j) · scale[j] (or · *scale for every j when kBroadcast), j < len.
template <int C, bool F16, bool kBroadcast>
void span(uint8_t* out, const uint8_t* codes, size_t i0, int len, const float* scale) {
  int j = 0;
#if KVT_CODEC_AVX2
  if (C == KV_CODEC_INT4 && i0 % 2 == 1 && len > 0) {
    put<F16>(out, 0, code_at<C>(codes, i0) * (kBroadcast ? *scale : scale[0]));
    j = 1;
  }
#if KVT_CODEC_AVX512
  const __m512 bcast16 = _mm512_set1_ps(*scale);
  for (; j + 16 <= len; j += 16) {
    const __m512 v = _mm512_mul_ps(codes16<C>(codes, i0 + j), kBroadcast ? bcast16 : _mm512_loadu_ps(scale + j));
    if (F16) _mm256_storeu_si256((__m256i*)(out + (size_t)j * 2), _mm512_cvtps_ph(v, 0));
    else _mm512_storeu_ps((float*)(out + (size_t)j * 4), v);
  }
#endif
  const __m256 bcast = _mm256_set1_ps(*scale);
  for (; j + 8 <= len; j += 8) {
    const __m256 v = _mm256_mul_ps(codes8<C>(codes, i0 + j), kBroadcast ? bcast : _mm256_loadu_ps(scale + j));
    if (F16) _mm_storeu_si128((__m128i*)(out + (size_t)j * 2), _mm256_cvtps_ph(v, 0));
    else _mm256_storeu_ps((float*)(out + (size_t)j * 4), v);
  }
#endif
  for (; j < len; ++j) put<F16>(out, j, code_at<C>(codes, i0 + j) * (kBroadcast ? *scale : scale[j]));
}

template <int C, bool F16>
void decode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s) {
  const int T = s.tokens, D = s.head_dim, G = kKvCodecInt4Group, groups = s.groups_per_row();
  const size_t n = s.matrix_values(), eb = F16 ? 2 : 4;
  const float premul = C == KV_CODEC_FP8 ? 256.0f : 1.0f;
  std::vector<float> sf(D);
  const uint8_t* in = src;
  for (int m = 0; m < s.matrices(); ++m) {
    const uint8_t* codes = in + s.matrix_scales(m) * 2;
    uint8_t* out = dst + (size_t)m * n * eb;
    if (s.per_group(m)) {
      for (int t = 0; t < T; ++t) {
        for (int g = 0; g < groups; ++g) {
          const float sc = f16_to_f32(load_u16(in + ((size_t)t * groups + g) * 2));
          const int d0 = g * G, len = D - d0 < G ? D - d0 : G;
          span<C, F16, true>(out + ((size_t)t * D + d0) * eb, codes, (size_t)t * D + d0, len, &sc);
        }
      }
    } else {
      for (int d = 0; d < D; ++d) sf[d] = f16_to_f32(load_u16(in + (size_t)d * 2)) * premul;
      for (int t = 0; t < T; ++t) span<C, F16, false>(out + (size_t)t * D * eb, codes, (size_t)t * D, D, sf.data());
    }
    in += s.matrix_bytes(m);
  }
}

}  // namespace

void kv_decode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s) {
  const bool f16 = s.dtype == F16;
  switch (s.codec) {
    case KV_CODEC_INT8: return f16 ? decode<KV_CODEC_INT8, true>(dst, src, s) : decode<KV_CODEC_INT8, false>(dst, src, s);
    case KV_CODEC_FP8: return f16 ? decode<KV_CODEC_FP8, true>(dst, src, s) : decode<KV_CODEC_FP8, false>(dst, src, s);
    default: return f16 ? decode<KV_CODEC_INT4, true>(dst, src, s) : decode<KV_CODEC_INT4, false>(dst, src, s);
  }
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
