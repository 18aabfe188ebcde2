// Fast matmul, compiled once per ISA (KVT_ISA_NS): out[M×N] = x[M×K] · Wᵀ,
// W packed by pack_weight into 16-row panels.
//
//   M <= 4 (decode): stream every panel once, all threads split the panels;
//                    the microkernel reads f16/bf16/f32 straight from the pack.
//   M  > 4 (prefill): per group of NP panels, widen f16/bf16 to an f32 scratch
//                    once, then sweep all rows in tiles of MR (register-blocked
//                    MR×(16·NP) outer-product microkernel).
//   Q8_0: x is quantized per 32-block to int8 (one shared routine), integer
//         dots (VNNI vpdpbusd / AVX2 maddubs / scalar), one f32 fma per block.
//
// Each out[r][n] is one sequential fma chain over k (f32/f16/bf16) or over
// blocks (Q8_0): identical for either path, any M, any thread count, any ISA.
#include <algorithm>
#include <vector>

#include "../kernels.h"
#include "../simd/v16.h"
#include "matmul-legacy.h"
#include "matmul-kquant.h"
#include "panel-groups.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

#if KVT_V16_AVX512
constexpr int kGemmMR = 8, kGemmNP = 2;
constexpr int kQ8GemmMR = 6, kQ8GemmNP = 2;
#elif KVT_V16_AVX2
constexpr int kGemmMR = 6, kGemmNP = 1;
constexpr int kQ8GemmMR = 2, kQ8GemmNP = 1;
#else
constexpr int kGemmMR = 4, kGemmNP = 1;
constexpr int kQ8GemmMR = 2, kQ8GemmNP = 1;
#endif
constexpr int kGemvMaxRows = 4;
#ifndef KVT_GEMV_PREFETCH
#define KVT_GEMV_PREFETCH 1024
#endif

template <int DT>
inline V16 load_w(const void* base, size_t idx) {
  if constexpr (DT == F32) return load(static_cast<const float*>(base) + idx);
  else if constexpr (DT == F16) return load_f16(static_cast<const uint16_t*>(base) + idx);
  else return load_bf16(static_cast<const uint16_t*>(base) + idx);
}

// out [rows_valid][cols_valid] (row stride ldo) = x rows · NP panels starting
// at `panels` (panel stride K·16 elements). Rows past rows_valid re-read the
// last valid row (results discarded), so tails need no extra instantiation.
// kPrefetch: software prefetch this many bytes ahead in each panel stream
// (decode streams every weight from DRAM once; prefill reads an L2 scratch).
template <int MR, int NP, int DT, int kPrefetch = 0>
inline void micro_dense(float* out, size_t ldo, const float* x, size_t ldx, int rows_valid, const void* panels,
                        int K, int cols_valid, int panels_valid) {
  const size_t es = DT == F32 ? 4 : 2;
  const uint8_t* pb[NP];
  for (int p = 0; p < NP; ++p)
    pb[p] = static_cast<const uint8_t*>(panels) + (size_t)(p < panels_valid ? p : panels_valid - 1) * K * kPanel * es;
  const float* xr[MR];
  for (int r = 0; r < MR; ++r) xr[r] = x + (size_t)(r < rows_valid ? r : rows_valid - 1) * ldx;
  V16 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = zero();
  for (int k = 0; k < K; ++k) {
#if !KVT_V16_SCALAR
    if constexpr (kPrefetch > 0) {
      // one line per stream every 64 bytes of panel consumed
      if (((size_t)k * kPanel * es) % 64 == 0)
        for (int p = 0; p < NP; ++p) _mm_prefetch((const char*)(pb[p] + (size_t)k * kPanel * es + kPrefetch), _MM_HINT_T0);
    }
#endif
    V16 b[NP];
    for (int p = 0; p < NP; ++p) b[p] = load_w<DT>(pb[p], (size_t)k * kPanel);
    for (int r = 0; r < MR; ++r) {
      V16 a = set1(xr[r][k]);
      for (int p = 0; p < NP; ++p) acc[r][p] = fma(a, b[p], acc[r][p]);
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

template <int MR, int NP, int DT>
static void gemv_panels(float* out, const float* x, const PackedWeight& w, int m, size_t p0, size_t p1) {
  const int N = w.rows, K = w.cols;
  const size_t es = DT == F32 ? 4 : 2;
  for (size_t p = p0; p < p1; p += NP) {
    int np = (int)std::min<size_t>(NP, p1 - p);
    int cols = std::min<int>(np * kPanel, N - (int)(p * kPanel));
    micro_dense<MR, NP, DT, KVT_GEMV_PREFETCH>(out + p * kPanel, N, x, K, m, w.data + p * K * kPanel * es, K, cols, np);
  }
}

template <int DT>
static void matmul_dense(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool) {
  const int N = w.rows, K = w.cols;
  const size_t n_panels = ((size_t)N + kPanel - 1) / kPanel;
  const size_t es = DT == F32 ? 4 : 2;
  if (m <= kGemvMaxRows) {
    parallel_for(pool, n_panels, [&](size_t b, size_t e) {
#if KVT_V16_AVX512
      switch (m) {
        case 1: gemv_panels<1, 4, DT>(out, x, w, m, b, e); break;
        case 2: gemv_panels<2, 4, DT>(out, x, w, m, b, e); break;
        default: gemv_panels<4, 3, DT>(out, x, w, m, b, e); break;
      }
#elif KVT_V16_AVX2
      if (m <= 2) gemv_panels<2, 2, DT>(out, x, w, m, b, e);
      else gemv_panels<4, 1, DT>(out, x, w, m, b, e);
#else
      gemv_panels<4, 1, DT>(out, x, w, m, b, e);
#endif
    });
    return;
  }
  for_each_panel_group(pool, n_panels, kGemmNP, N, [&](size_t p, int np, int cols) {
    thread_local std::vector<float> scratch;
    const void* src = w.data + p * K * kPanel * es;
    if (DT != F32) {  // widen once per panel group, reuse for every row tile
      size_t n = (size_t)np * K * kPanel;
      if (scratch.size() < n) scratch.resize(n);
      for (size_t i = 0; i < n; i += kPanel) store(scratch.data() + i, load_w<DT>(src, i));
      src = scratch.data();
    }
    for (int r0 = 0; r0 < m; r0 += kGemmMR) {
      micro_dense<kGemmMR, kGemmNP, F32>(out + (size_t)r0 * N + p * kPanel, N, x + (size_t)r0 * K, K,
                                         std::min(kGemmMR, m - r0), src, K, cols, np);
    }
  });
}

// ---- Q8_0 -------------------------------------------------------------------
// Packed block (per 16-row panel, per 32-col block): f16 d[16], u8 q[8][16][4] = w+128.
constexpr size_t kQ8PanelBlockBytes = kPanel * 2 + kPanel * kQ8Block;

#if KVT_V16_AVX512
struct VI {
  __m512i v;
};
inline VI vi_zero() { return {_mm512_setzero_si512()}; }
inline VI vi_load(const uint8_t* p) { return {_mm512_loadu_si512(p)}; }
inline VI vi_bcast4(const int8_t* p) {
  int32_t t;
  std::memcpy(&t, p, 4);
  return {_mm512_set1_epi32(t)};
}
// acc += Σ_t (w_u8[t]) · x_s8[t]  per 32-bit lane
inline VI vi_dot4(VI acc, VI w, VI x) { return {_mm512_dpbusd_epi32(acc.v, w.v, x.v)}; }
// undo the +128 bias of the weights: Σ (w+128)·x − 128·Σx
inline V16 vi_finish(VI acc, int32_t xsum) {
  return {_mm512_cvtepi32_ps(_mm512_sub_epi32(acc.v, _mm512_set1_epi32(128 * xsum)))};
}
#elif KVT_V16_AVX2
struct VI {
  __m256i lo, hi;
};
inline VI vi_zero() { return {_mm256_setzero_si256(), _mm256_setzero_si256()}; }
inline VI vi_load(const uint8_t* p) {
  const __m256i bias = _mm256_set1_epi8((char)0x80);
  // back to signed w so |w| ≤ 128, |x| ≤ 127 keeps maddubs pairs ≤ 32512 (no saturation)
  return {_mm256_xor_si256(_mm256_loadu_si256((const __m256i*)p), bias),
          _mm256_xor_si256(_mm256_loadu_si256((const __m256i*)(p + 32)), bias)};
}
inline VI vi_bcast4(const int8_t* p) {
  int32_t t;
  std::memcpy(&t, p, 4);
  __m256i v = _mm256_set1_epi32(t);
  return {v, v};
}
inline __m256i dot4_half(__m256i acc, __m256i w, __m256i x) {
  __m256i p16 = _mm256_maddubs_epi16(_mm256_abs_epi8(w), _mm256_sign_epi8(x, w));
  return _mm256_add_epi32(acc, _mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}
inline VI vi_dot4(VI acc, VI w, VI x) { return {dot4_half(acc.lo, w.lo, x.lo), dot4_half(acc.hi, w.hi, x.hi)}; }
inline V16 vi_finish(VI acc, int32_t) { return {_mm256_cvtepi32_ps(acc.lo), _mm256_cvtepi32_ps(acc.hi)}; }
#else
struct VI {
  int32_t v[16];
};
struct VW {
  const uint8_t* p;
};
inline VI vi_zero() { return VI{}; }
inline VW vi_load(const uint8_t* p) { return {p}; }
inline const int8_t* vi_bcast4(const int8_t* p) { return p; }
inline VI vi_dot4(VI acc, VW w, const int8_t* x) {
  for (int j = 0; j < 16; ++j)
    for (int t = 0; t < 4; ++t) acc.v[j] += ((int32_t)w.p[j * 4 + t] - 128) * (int32_t)x[t];
  return acc;
}
inline V16 vi_finish(VI acc, int32_t) {
  V16 r;
  for (int j = 0; j < 16; ++j) r.v[j] = (float)acc.v[j];
  return r;
}
#endif

template <int MR, int NP, int kPrefetch = 0>
inline void micro_q8(float* out, size_t ldo, const Q8Rows& xq, int row0, int rows_valid, int K,
                     const uint8_t* panels, int cols_valid, int panels_valid) {
  const int nb = K / kQ8Block;
  const uint8_t* pb[NP];
  for (int p = 0; p < NP; ++p) pb[p] = panels + (size_t)(p < panels_valid ? p : panels_valid - 1) * nb * kQ8PanelBlockBytes;
  int rr[MR];
  for (int r = 0; r < MR; ++r) rr[r] = row0 + (r < rows_valid ? r : rows_valid - 1);
  V16 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = zero();
  for (int b = 0; b < nb; ++b) {
#if !KVT_V16_SCALAR
    if constexpr (kPrefetch > 0) {
      for (int p = 0; p < NP; ++p)
        for (size_t off = 0; off < kQ8PanelBlockBytes; off += 64)
          _mm_prefetch((const char*)(pb[p] + b * kQ8PanelBlockBytes + off + kPrefetch), _MM_HINT_T0);
    }
#endif
    VI iacc[MR][NP];
    for (int r = 0; r < MR; ++r)
      for (int p = 0; p < NP; ++p) iacc[r][p] = vi_zero();
    for (int g = 0; g < 8; ++g) {
      decltype(vi_load(nullptr)) wv[NP];
      for (int p = 0; p < NP; ++p) wv[p] = vi_load(pb[p] + b * kQ8PanelBlockBytes + kPanel * 2 + g * 64);
      for (int r = 0; r < MR; ++r) {
        auto xv = vi_bcast4(xq.q + (size_t)rr[r] * K + b * kQ8Block + g * 4);
        for (int p = 0; p < NP; ++p) iacc[r][p] = vi_dot4(iacc[r][p], wv[p], xv);
      }
    }
    V16 dw[NP];
    for (int p = 0; p < NP; ++p) dw[p] = load_f16(reinterpret_cast<const uint16_t*>(pb[p] + b * kQ8PanelBlockBytes));
    for (int r = 0; r < MR; ++r) {
      size_t bi = (size_t)rr[r] * nb + b;
      V16 dx = set1(xq.d[bi]);
      for (int p = 0; p < NP; ++p) acc[r][p] = fma(mul(dw[p], dx), vi_finish(iacc[r][p], xq.sum[bi]), acc[r][p]);
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

template <int MR, int NP, int kPrefetch = 0>
static void q8_panels(float* out, const Q8Rows& xq, const PackedWeight& w, int m, size_t p0, size_t p1) {
  const int N = w.rows, K = w.cols;
  const size_t panel_bytes = (size_t)(K / kQ8Block) * kQ8PanelBlockBytes;
  for (size_t p = p0; p < p1; p += NP) {
    int np = (int)std::min<size_t>(NP, p1 - p);
    int cols = std::min<int>(np * kPanel, N - (int)(p * kPanel));
    for (int r0 = 0; r0 < m; r0 += MR)
      micro_q8<MR, NP, kPrefetch>(out + (size_t)r0 * N + p * kPanel, N, xq, r0, std::min(MR, m - r0), K,
                       w.data + p * panel_bytes, cols, np);
  }
}

static void matmul_q8(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool) {
  const int N = w.rows, K = w.cols;
  const int nb = K / kQ8Block;
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> s;
  q.resize((size_t)m * K);
  d.resize((size_t)m * nb);
  s.resize((size_t)m * nb);
  Q8Rows xq{q.data(), d.data(), s.data()};
  parallel_for(pool, (size_t)m, [&](size_t b, size_t e) {
    Q8Rows part{xq.q + b * K, xq.d + b * nb, xq.sum + b * nb};
    quantize_rows_q8(part, x + b * K, (int)(e - b), K);
  }, 4);
  const size_t n_panels = ((size_t)N + kPanel - 1) / kPanel;
  parallel_for(pool, n_panels, [&](size_t b, size_t e) {
#if KVT_V16_AVX512
    if (m == 1) q8_panels<1, 4>(out, xq, w, m, b, e);
    else if (m == 2) q8_panels<2, 4>(out, xq, w, m, b, e);
    else if (m <= 4) q8_panels<4, 2>(out, xq, w, m, b, e);
    else q8_panels<kQ8GemmMR, kQ8GemmNP>(out, xq, w, m, b, e);
#else
    if (m == 1) q8_panels<1, 1>(out, xq, w, m, b, e);
    else q8_panels<kQ8GemmMR, kQ8GemmNP>(out, xq, w, m, b, e);
#endif
  });
}

void matmul(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool) {
  if (m <= 0 || w.rows <= 0) return;
  switch (w.dtype) {
    case F32: return matmul_dense<F32>(out, x, w, m, pool);
    case F16: return matmul_dense<F16>(out, x, w, m, pool);
    case BF16: return matmul_dense<BF16>(out, x, w, m, pool);
    case Q8_0: return matmul_q8(out, x, w, m, pool);
    case Q4_0: case Q4_1: case Q5_0: case Q5_1: case IQ4_NL: case IQ4_XS:
      return matmul_legacy(out, x, w, m, pool);  // matmul-legacy.cc
    case Q2_K: case Q3_K: case Q4_K: case Q5_K: case Q6_K:
      return matmul_kquant(out, x, w, m, pool);  // matmul-kquant.cc
  }
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
