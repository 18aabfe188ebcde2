// Fast K-quant matmul (Q2_K .. Q6_K), compiled once per ISA (KVT_ISA_NS):
//   out [M][N] = x [M][K] · Wᵀ, W packed by pack_kquant (matmul-kquant.h), K % 256 == 0.
//
//   x is quantized once per call (quantize_rows_q8k: int8, one scale per 256).
//   M <= 4 (decode): every panel is streamed once; each 32-column unit of a
//       super-block is decoded from its bit planes to u8 codes in registers
//       and dotted against all M rows.
//   M  > 4 (prefill): per group of NP panels the codes are decoded once to a
//       u8 scratch (4 KiB per panel and super-block), then every tile of MR
//       rows sweeps it.
//   Integer dots: VNNI vpdpbusd (u8 codes × s8 activations) / AVX2 maddubs /
//   scalar; per sub-block one int32 multiply by its scale; per super-block
//   one f32 fma (two with mins), in super-block order — identical for either
//   path, any M, any thread count, any ISA, and to matmul_kquant_ref.
#include <algorithm>
#include <utility>
#include <vector>

#include "../simd/v16.h"
#include "matmul-kquant.h"
#include "panel-groups.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

namespace {

template <typename F, int... I>
inline void static_for_impl(F&& f, std::integer_sequence<int, I...>) {
  (f(std::integral_constant<int, I>{}), ...);
}
template <int N, typename F>
inline void static_for(F&& f) {
  static_for_impl(f, std::make_integer_sequence<int, N>{});
}

inline int32_t load4(const int8_t* p) {
  int32_t t;
  std::memcpy(&t, p, 4);
  return t;
}

// VB: 64 code bytes = 16 rows × 4 columns; VI: 16 int32 lanes (one per row).
#if KVT_V16_AVX512
struct VB {
  __m512i v;
};
inline VB vb_load(const uint8_t* p) { return {_mm512_loadu_si512(p)}; }
inline void vb_store(uint8_t* p, VB a) { _mm512_storeu_si512(p, a.v); }
template <int S, int M>
inline VB vb_field(VB a) {  // (a >> S) & M per byte
  __m512i t = S ? _mm512_srli_epi16(a.v, S) : a.v;
  return {_mm512_and_si512(t, _mm512_set1_epi8((char)M))};
}
template <int S>
inline VB vb_or_shl(VB lo, VB hi) {  // lo | hi << S (hi's fields are masked: no carry across bytes)
  return {_mm512_or_si512(lo.v, _mm512_slli_epi16(hi.v, S))};
}
struct VI {
  __m512i v;
};
using VX = __m512i;
inline VX vx_bcast(const int8_t* p) { return _mm512_set1_epi32(load4(p)); }
inline VI vi_zero() { return {_mm512_setzero_si512()}; }
inline VI vi_set1(int32_t a) { return {_mm512_set1_epi32(a)}; }
inline VI vi_add(VI a, VI b) { return {_mm512_add_epi32(a.v, b.v)}; }
inline VI vi_sub(VI a, VI b) { return {_mm512_sub_epi32(a.v, b.v)}; }
inline VI vi_mul(VI a, VI b) { return {_mm512_mullo_epi32(a.v, b.v)}; }
inline VI vi_dot(VI acc, VB w, VX x) { return {_mm512_dpbusd_epi32(acc.v, w.v, x)}; }
inline VI vi_u8(const uint8_t* p) { return {_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i*)p))}; }
inline VI vi_i8(const uint8_t* p) { return {_mm512_cvtepi8_epi32(_mm_loadu_si128((const __m128i*)p))}; }
inline VI vi_and15(VI a) { return {_mm512_and_si512(a.v, _mm512_set1_epi32(15))}; }
inline VI vi_shr4(VI a) { return {_mm512_srli_epi32(a.v, 4)}; }
inline V16 vi_to_f(VI a) { return {_mm512_cvtepi32_ps(a.v)}; }
#elif KVT_V16_AVX2
struct VB {
  __m256i lo, hi;
};
inline VB vb_load(const uint8_t* p) {
  return {_mm256_loadu_si256((const __m256i*)p), _mm256_loadu_si256((const __m256i*)(p + 32))};
}
inline void vb_store(uint8_t* p, VB a) {
  _mm256_storeu_si256((__m256i*)p, a.lo);
  _mm256_storeu_si256((__m256i*)(p + 32), a.hi);
}
template <int S, int M>
inline VB vb_field(VB a) {
  const __m256i m = _mm256_set1_epi8((char)M);
  if constexpr (S == 0) return {_mm256_and_si256(a.lo, m), _mm256_and_si256(a.hi, m)};
  return {_mm256_and_si256(_mm256_srli_epi16(a.lo, S), m), _mm256_and_si256(_mm256_srli_epi16(a.hi, S), m)};
}
template <int S>
inline VB vb_or_shl(VB lo, VB hi) {
  return {_mm256_or_si256(lo.lo, _mm256_slli_epi16(hi.lo, S)), _mm256_or_si256(lo.hi, _mm256_slli_epi16(hi.hi, S))};
}
struct VI {
  __m256i lo, hi;
};
using VX = __m256i;
inline VX vx_bcast(const int8_t* p) { return _mm256_set1_epi32(load4(p)); }
inline VI vi_zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
inline VI vi_set1(int32_t a) { return {_mm256_set1_epi32(a), _mm256_set1_epi32(a)}; }
inline VI vi_add(VI a, VI b) { return {_mm256_add_epi32(a.lo, b.lo), _mm256_add_epi32(a.hi, b.hi)}; }
inline VI vi_sub(VI a, VI b) { return {_mm256_sub_epi32(a.lo, b.lo), _mm256_sub_epi32(a.hi, b.hi)}; }
inline VI vi_mul(VI a, VI b) { return {_mm256_mullo_epi32(a.lo, b.lo), _mm256_mullo_epi32(a.hi, b.hi)}; }
// codes ≤ 63, |x| ≤ 127: a maddubs pair is ≤ 16002, no int16 saturation
inline __m256i dot_half(__m256i acc, __m256i w, __m256i x) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(w, x), _mm256_set1_epi16(1)));
}
inline VI vi_dot(VI acc, VB w, VX x) { return {dot_half(acc.lo, w.lo, x), dot_half(acc.hi, w.hi, x)}; }
inline VI vi_u8(const uint8_t* p) {
  return {_mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)p)),
          _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i*)(p + 8)))};
}
inline VI vi_i8(const uint8_t* p) {
  return {_mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)p)),
          _mm256_cvtepi8_epi32(_mm_loadl_epi64((const __m128i*)(p + 8)))};
}
inline VI vi_and15(VI a) {
  const __m256i m = _mm256_set1_epi32(15);
  return {_mm256_and_si256(a.lo, m), _mm256_and_si256(a.hi, m)};
}
inline VI vi_shr4(VI a) { return {_mm256_srli_epi32(a.lo, 4), _mm256_srli_epi32(a.hi, 4)}; }
inline V16 vi_to_f(VI a) { return {_mm256_cvtepi32_ps(a.lo), _mm256_cvtepi32_ps(a.hi)}; }
#else
struct VB {
  uint8_t b[64];
};
inline VB vb_load(const uint8_t* p) {
  VB r;
  std::memcpy(r.b, p, 64);
  return r;
}
inline void vb_store(uint8_t* p, VB a) { std::memcpy(p, a.b, 64); }
template <int S, int M>
inline VB vb_field(VB a) {
  VB r;
  for (int i = 0; i < 64; ++i) r.b[i] = (uint8_t)((a.b[i] >> S) & M);
  return r;
}
template <int S>
inline VB vb_or_shl(VB lo, VB hi) {
  for (int i = 0; i < 64; ++i) lo.b[i] = (uint8_t)(lo.b[i] | (hi.b[i] << S));
  return lo;
}
struct VI {
  int32_t v[16];
};
using VX = const int8_t*;
inline VX vx_bcast(const int8_t* p) { return p; }
inline VI vi_zero() { return VI{}; }
inline VI vi_set1(int32_t a) {
  VI r;
  for (int j = 0; j < 16; ++j) r.v[j] = a;
  return r;
}
inline VI vi_add(VI a, VI b) {
  for (int j = 0; j < 16; ++j) a.v[j] += b.v[j];
  return a;
}
inline VI vi_sub(VI a, VI b) {
  for (int j = 0; j < 16; ++j) a.v[j] -= b.v[j];
  return a;
}
inline VI vi_mul(VI a, VI b) {
  for (int j = 0; j < 16; ++j) a.v[j] *= b.v[j];
  return a;
}
inline VI vi_dot(VI acc, const VB& w, VX x) {
  for (int j = 0; j < 16; ++j)
    for (int t = 0; t < 4; ++t) acc.v[j] += (int32_t)w.b[j * 4 + t] * (int32_t)x[t];
  return acc;
}
inline VI vi_u8(const uint8_t* p) {
  VI r;
  for (int j = 0; j < 16; ++j) r.v[j] = p[j];
  return r;
}
inline VI vi_i8(const uint8_t* p) {
  VI r;
  for (int j = 0; j < 16; ++j) r.v[j] = (int8_t)p[j];
  return r;
}
inline VI vi_and15(VI a) {
  for (int j = 0; j < 16; ++j) a.v[j] &= 15;
  return a;
}
inline VI vi_shr4(VI a) {
  for (int j = 0; j < 16; ++j) a.v[j] >>= 4;
  return a;
}
inline V16 vi_to_f(VI a) {
  V16 r;
  for (int j = 0; j < 16; ++j) r.v[j] = (float)a.v[j];
  return r;
}
#endif

// Codes of group g of unit u of one PSB: columns 32u+4g .. 32u+4g+3 of 16 rows.
template <int DT, int g>
inline VB decode_group(const uint8_t* psb, int u) {
  constexpr KqSpec S = kq_spec(DT);
  constexpr int LW = S.lo_bits, HW = S.hi_bits;
  constexpr int per = 8 / LW;
  VB w = vb_field<(g % per) * LW, (1 << LW) - 1>(vb_load(psb + S.lo_at() + (u * LW + g / per) * 64));
  if constexpr (HW > 0) {
    constexpr int perh = 8 / HW;
    w = vb_or_shl<LW>(w, vb_field<(g % perh) * HW, (1 << HW) - 1>(vb_load(psb + S.hi_at() + (u * HW + g / perh) * 64)));
  }
  return w;
}

template <int DT>
inline VI scale_vec(const uint8_t* psb, int s) {
  constexpr KqSpec S = kq_spec(DT);
  const uint8_t* p = psb + S.scales_at() + s * kPanel;
  if constexpr (S.scale_kind == 0) return vi_u8(p);
  else if constexpr (S.scale_kind == 1) return vi_i8(p);
  else return vi_and15(vi_u8(p));
}
template <int DT>
inline VI min_vec(const uint8_t* psb, int s) {
  constexpr KqSpec S = kq_spec(DT);
  const uint8_t* p = psb + S.scales_at() + s * kPanel;
  if constexpr (S.scale_kind == 0) return vi_u8(p + 128);
  else return vi_shr4(vi_u8(p));
}

constexpr size_t kScratchPsb = 64 * 64;  // decoded codes of one panel super-block

// out [rows_valid][cols_valid] (row stride ldo) = rows row0.. of xq · NP panels.
// kScratch: codes come from `scratch` (per panel nsb × 4 KiB, already decoded)
// instead of the packed planes. Rows past rows_valid re-read the last valid
// row (results discarded), panels past panels_valid the last valid panel.
template <int DT, int MR, int NP, bool kScratch, int kPrefetch = 0>
inline void micro_kq(float* out, size_t ldo, const Q8KRows& xq, int row0, int rows_valid, int K,
                     const uint8_t* panels, const uint8_t* scratch, int cols_valid, int panels_valid) {
  constexpr KqSpec S = kq_spec(DT);
  constexpr int kSubsPerUnit = 32 / S.sub;
  constexpr int kGroupsPerSub = S.sub / 4;
  const int nsb = K / kQKK;
  const size_t panel_bytes = (size_t)nsb * S.bytes();
  const uint8_t* pb[NP];
  const uint8_t* sp[NP];
  for (int p = 0; p < NP; ++p) {
    int pp = p < panels_valid ? p : panels_valid - 1;
    pb[p] = panels + (size_t)pp * panel_bytes;
    sp[p] = scratch ? scratch + (size_t)pp * nsb * kScratchPsb : nullptr;
  }
  int rr[MR];
  for (int r = 0; r < MR; ++r) rr[r] = row0 + (r < rows_valid ? r : rows_valid - 1);
  V16 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = zero();
  for (int b = 0; b < nsb; ++b) {
    const uint8_t* hb[NP];
    for (int p = 0; p < NP; ++p) hb[p] = pb[p] + (size_t)b * S.bytes();
    const int8_t* xb[MR];
    const int32_t* bs[MR];
    for (int r = 0; r < MR; ++r) {
      xb[r] = xq.q + (size_t)rr[r] * K + (size_t)b * kQKK;
      bs[r] = xq.bsum + (size_t)rr[r] * (K / 16) + (size_t)b * 16;
    }
    VI isum[MR][NP];
    for (int r = 0; r < MR; ++r)
      for (int p = 0; p < NP; ++p) isum[r][p] = vi_zero();
    for (int u = 0; u < 8; ++u) {
#if !KVT_V16_SCALAR
      if constexpr (kPrefetch > 0) {  // the stream kPrefetch bytes ahead, spread over the 8 units
        constexpr int kLines = (S.bytes() + 63) / 64;
        for (int p = 0; p < NP; ++p)
          for (int l = u; l < kLines; l += 8) _mm_prefetch((const char*)(hb[p] + kPrefetch + l * 64), _MM_HINT_T0);
      }
#endif
      static_for<kSubsPerUnit>([&](auto sc) {
        constexpr int si = decltype(sc)::value;
        const int s = u * kSubsPerUnit + si;
        VI idot[MR][NP];
        for (int r = 0; r < MR; ++r)
          for (int p = 0; p < NP; ++p) idot[r][p] = vi_zero();
        static_for<kGroupsPerSub>([&](auto gc) {
          constexpr int g = si * kGroupsPerSub + decltype(gc)::value;
          VB w[NP];
          for (int p = 0; p < NP; ++p) {
            if constexpr (kScratch) w[p] = vb_load(sp[p] + ((size_t)b * 64 + u * 8 + g) * 64);
            else w[p] = decode_group<DT, g>(hb[p], u);
          }
          for (int r = 0; r < MR; ++r) {
            VX xv = vx_bcast(xb[r] + u * 32 + g * 4);
            for (int p = 0; p < NP; ++p) idot[r][p] = vi_dot(idot[r][p], w[p], xv);
          }
        });
        VI scv[NP];
        for (int p = 0; p < NP; ++p) scv[p] = scale_vec<DT>(hb[p], s);
        for (int r = 0; r < MR; ++r) {
          if constexpr (S.off != 0) {
            VI corr = vi_set1(S.off * bs[r][s]);  // sub == 16: one bsum per sub-block
            for (int p = 0; p < NP; ++p) idot[r][p] = vi_sub(idot[r][p], corr);
          }
          for (int p = 0; p < NP; ++p) isum[r][p] = vi_add(isum[r][p], vi_mul(scv[p], idot[r][p]));
        }
      });
    }
    V16 dw[NP];
    for (int p = 0; p < NP; ++p) dw[p] = load_f16(reinterpret_cast<const uint16_t*>(hb[p]));
    for (int r = 0; r < MR; ++r) {
      V16 dx = set1(xq.d[(size_t)rr[r] * nsb + b]);
      for (int p = 0; p < NP; ++p) acc[r][p] = fma(mul(dw[p], dx), vi_to_f(isum[r][p]), acc[r][p]);
    }
    if constexpr (S.has_min) {
      VI imin[MR][NP];
      for (int r = 0; r < MR; ++r)
        for (int p = 0; p < NP; ++p) imin[r][p] = vi_zero();
      for (int s = 0; s < S.nsub(); ++s) {
        VI mv[NP];
        for (int p = 0; p < NP; ++p) mv[p] = min_vec<DT>(hb[p], s);
        for (int r = 0; r < MR; ++r) {
          VI xs = vi_set1(S.sub == 32 ? bs[r][2 * s] + bs[r][2 * s + 1] : bs[r][s]);
          for (int p = 0; p < NP; ++p) imin[r][p] = vi_add(imin[r][p], vi_mul(mv[p], xs));
        }
      }
      V16 dm[NP];
      for (int p = 0; p < NP; ++p) dm[p] = load_f16(reinterpret_cast<const uint16_t*>(hb[p]) + kPanel);
      for (int r = 0; r < MR; ++r) {
        V16 ndx = set1(-xq.d[(size_t)rr[r] * nsb + b]);
        for (int p = 0; p < NP; ++p) acc[r][p] = fma(mul(dm[p], ndx), vi_to_f(imin[r][p]), acc[r][p]);
      }
    }
  }
  for (int r = 0; r < MR; ++r) {
    if (r >= rows_valid) break;
    for (int p = 0; p < NP; ++p) {
      int c = cols_valid - p * kPanel;
      if (c > 0) store_n(out + (size_t)r * ldo + (size_t)p * kPanel, acc[r][p], c);
    }
  }
}

// Decode streams every weight byte once (from L3 or DRAM): software prefetch
// this far ahead in each panel stream (measured on synthetic:small Q4_K_M, one
// core: all GEMVs of a token 7.0-14 ms without, 4.9-6.0 ms with 2048).
#ifndef KVT_KQ_PREFETCH
#define KVT_KQ_PREFETCH 2048
#endif

#if KVT_V16_AVX512
constexpr int kKqGemmMR = 4, kKqGemmNP = 2;
#else
constexpr int kKqGemmMR = 2, kKqGemmNP = 1;
#endif

template <int DT, int MR, int NP, int PF = KVT_KQ_PREFETCH>
void gemv_kq(float* out, const Q8KRows& xq, const PackedWeight& w, int m, size_t p0, size_t p1) {
  const int N = w.rows, K = w.cols;
  const size_t panel_bytes = (size_t)(K / kQKK) * kq_spec(DT).bytes();
  for (size_t p = p0; p < p1; p += NP) {
    int np = (int)std::min<size_t>(NP, p1 - p);
    int cols = std::min<int>(np * kPanel, N - (int)(p * kPanel));
    micro_kq<DT, MR, NP, false, PF>(out + p * kPanel, N, xq, 0, m, K, w.data + p * panel_bytes, nullptr, cols, np);
  }
}

template <int DT>
void matmul_kq(float* out, const Q8KRows& xq, const PackedWeight& w, int m, ThreadPool& pool) {
  const int N = w.rows, K = w.cols;
  const int nsb = K / kQKK;
  const size_t n_panels = ((size_t)N + kPanel - 1) / kPanel;
  if (m <= 4) {
    parallel_for(pool, n_panels, [&](size_t b, size_t e) {
#if KVT_V16_AVX512
      if (m == 1) gemv_kq<DT, 1, 4>(out, xq, w, m, b, e);
      else if (m == 2) gemv_kq<DT, 2, 2>(out, xq, w, m, b, e);
      else gemv_kq<DT, 4, 2>(out, xq, w, m, b, e);
#else
      if (m <= 2) gemv_kq<DT, 2, 1>(out, xq, w, m, b, e);
      else gemv_kq<DT, 4, 1>(out, xq, w, m, b, e);
#endif
    });
    return;
  }
  const size_t panel_bytes = (size_t)nsb * kq_spec(DT).bytes();
  for_each_panel_group(pool, n_panels, kKqGemmNP, N, [&](size_t p, int np, int cols) {
    thread_local std::vector<uint8_t> scratch;
    const uint8_t* src = w.data + p * panel_bytes;
    size_t need = (size_t)np * nsb * kScratchPsb;
    if (scratch.size() < need) scratch.resize(need);
    for (int q = 0; q < np; ++q)  // decode once per panel group, reuse for every row tile
      for (int b = 0; b < nsb; ++b)
        for (int u = 0; u < 8; ++u) {
          const uint8_t* psb = src + q * panel_bytes + (size_t)b * kq_spec(DT).bytes();
          uint8_t* dst = scratch.data() + ((size_t)q * nsb + b) * kScratchPsb + (size_t)u * 8 * 64;
          static_for<8>([&](auto gc) {
            constexpr int g = decltype(gc)::value;
            vb_store(dst + g * 64, decode_group<DT, g>(psb, u));
          });
        }
    for (int r0 = 0; r0 < m; r0 += kKqGemmMR)
      micro_kq<DT, kKqGemmMR, kKqGemmNP, true>(out + (size_t)r0 * N + p * kPanel, N, xq, r0,
                                               std::min(kKqGemmMR, m - r0), K, src, scratch.data(), cols, np);
  });
}

}  // namespace

void matmul_kquant(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool) {
  const int K = w.cols;
  const int nsb = K / kQKK;
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> s;
  q.resize((size_t)m * K);
  d.resize((size_t)m * nsb);
  s.resize((size_t)m * (K / 16));
  Q8KRows xq{q.data(), d.data(), s.data()};
  parallel_for(pool, (size_t)m, [&](size_t b, size_t e) {
    Q8KRows part{xq.q + b * K, xq.d + b * nsb, xq.bsum + b * (K / 16)};
    quantize_rows_q8k(part, x + b * K, (int)(e - b), K);
  }, 4);
  switch (w.dtype) {
    case Q2_K: return matmul_kq<Q2_K>(out, xq, w, m, pool);
    case Q3_K: return matmul_kq<Q3_K>(out, xq, w, m, pool);
    case Q4_K: return matmul_kq<Q4_K>(out, xq, w, m, pool);
    case Q5_K: return matmul_kq<Q5_K>(out, xq, w, m, pool);
    case Q6_K: return matmul_kq<Q6_K>(out, xq, w, m, pool);
  }
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
