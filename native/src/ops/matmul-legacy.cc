// Fast matmul by Q4_0 / Q4_1 / Q5_0 / Q5_1 / IQ4_NL / IQ4_XS weights,
// compiled once per ISA (KVT_ISA_NS). Shapes: out [M][N] = x [M][K] · Wᵀ,
// W [N][K] packed into 16-row panels (layout: matmul-legacy.h).
//
// x is quantized to int8 as llama.cpp quantizes it for these weights:
//   32-value types: per 32 (quantize_rows_q8: q, dx, s = Σq), dx and sx = dx·s
//                   rounded to f16 as ggml's block_q8_0 / _q8_1 hold them (ggml_q8_scales);
//   IQ4_XS:         per 256 as block_q8_K (quantize_rows_q8k_ggml), f32 dx.
// Per output, per scale block (32 values; IQ4_XS 256), in this fixed order (== matmul_legacy_ref):
//   isum = Σ value_i · q_i                   exact int32 (32-value types: |isum| < 2^24, (float)isum exact)
//          IQ4_XS: Σ over its 8 sub-blocks of ls · Σ L[q]·q   (exact int32; |isum| < 2^28)
//   acc  = fma(dw · dx, (float)isum, acc)    dw = d
//   acc  = fma(m, sx, acc)                   Q4_1 / Q5_1 only
// The integer dots are exact on every ISA (matmul-legacy-simd.h: u8 codes
// with a bias the dot starts from), so scalar, AVX2 and AVX-512 give the same
// bits, for any M and thread count.
//
//   M <= 4 (decode): every panel streamed once (prefetched), MR = M rows.
//   M  > 4 (prefill): register-blocked MR × (16·NP) tiles over all rows per panel group.
#include <algorithm>
#include <vector>

#include "../simd/v16.h"
#include "matmul-legacy-simd.h"
#include "matmul-legacy.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

#if defined(KVT_LEGACY_GEMM_MR)
constexpr int kGemmMR = KVT_LEGACY_GEMM_MR, kGemmNP = KVT_LEGACY_GEMM_NP;
#elif KVT_V16_AVX512
constexpr int kGemmMR = 8, kGemmNP = 1;
#elif KVT_V16_AVX2
constexpr int kGemmMR = 4, kGemmNP = 1;
#else
constexpr int kGemmMR = 2, kGemmNP = 1;
#endif
#ifndef KVT_LEGACY_PREFETCH
#define KVT_LEGACY_PREFETCH 1024
#endif

// Quantized activation rows plus, per (row, 32-block), −bias·s (the integer
// dot's start) and sx (the Q4_1 / Q5_1 min term's factor).
struct XRows {
  Q8Rows q8;
  const int32_t* neg_bias_sum;  // [M][K/32]
  const float* sx;              // [M][K/32]
};

// out [rows_valid][cols_valid] (row stride ldo) = rows row0.. of xq · NP
// panels from `panels` (stride panel_bytes). Rows / panels past the valid
// ones re-read the last valid one; their results are not stored.
template <int DT, int MR, int NP, int kPrefetch = 0>
inline void micro_legacy(float* out, size_t ldo, const XRows& xr, int row0, int rows_valid, int K,
                         const uint8_t* panels, size_t panel_bytes, int cols_valid, int panels_valid) {
  constexpr LegacyPack L = legacy_pack(DT);
  constexpr int kSub = legacy_block_elems(DT) / kQK;  // 32-blocks per scale block (IQ4_XS: 8)
  const Q8Rows& xq = xr.q8;
  const int nb = K / kQK, nsb = nb / kSub;
  const uint8_t* pb[NP];
  for (int p = 0; p < NP; ++p) pb[p] = panels + (size_t)(p < panels_valid ? p : panels_valid - 1) * panel_bytes;
  int rr[MR];
  for (int r = 0; r < MR; ++r) rr[r] = row0 + (r < rows_valid ? r : rows_valid - 1);
  V16 acc[MR][NP];
  for (int r = 0; r < MR; ++r)
    for (int p = 0; p < NP; ++p) acc[r][p] = zero();
  for (int sb = 0; sb < nsb; ++sb) {
    const size_t base = (size_t)sb * L.bytes;
    VI isb[MR][NP];  // the scale block's integer dot (IQ4_XS: Σ_sub ls·isum)
    for (int sub = 0; sub < kSub; ++sub) {
      const int b = sb * kSub + sub;  // 32-block
      const size_t qs = base + L.qs + (size_t)sub * kQsBlockBytes;
#if !KVT_V16_SCALAR
      if constexpr (kPrefetch > 0) {
        constexpr int kLines = kSub > 1 ? 5 : (L.bytes + 63) / 64;  // IQ4_XS: 8 × 5 lines ≥ 2208 B
        for (int p = 0; p < NP; ++p)
          for (int i = 0; i < kLines; ++i)
            _mm_prefetch((const char*)(pb[p] + base + (sub * kLines + i) * 64 + kPrefetch), _MM_HINT_T0);
      }
#endif
      VI iacc[MR][NP];
      for (int r = 0; r < MR; ++r)
        for (int p = 0; p < NP; ++p) iacc[r][p] = vi_init(xr.neg_bias_sum + (size_t)rr[r] * nb + b);
      Raw qh[NP];
      for (int p = 0; p < NP; ++p) qh[p] = raw_load(pb[p] + (has_qh(DT) ? base + L.qh : qs));
#pragma GCC unroll 4
      for (int g = 0; g < 4; ++g) {
        WV lo[NP], hi[NP];  // columns 4g.. and 16+4g..
        for (int p = 0; p < NP; ++p) {
          Raw raw = raw_load(pb[p] + qs + g * kQsGroupBytes);
          lo[p] = codes<DT, false>(raw, qh[p], g);
          hi[p] = codes<DT, true>(raw, qh[p], g);
        }
        for (int r = 0; r < MR; ++r) {
          const int8_t* xb = xq.q + (size_t)rr[r] * K + b * kQK + g * 4;
          auto xl = bcast4(xb);
          auto xh = bcast4(xb + 16);
          for (int p = 0; p < NP; ++p) iacc[r][p] = dot8<DT>(iacc[r][p], lo[p], xl, hi[p], xh);
        }
      }
      if constexpr (kSub > 1) {
        for (int p = 0; p < NP; ++p) {
          const VI ls = vi_load_i8(reinterpret_cast<const int8_t*>(pb[p] + base + L.ls) + sub * kPanel);
          for (int r = 0; r < MR; ++r) isb[r][p] = sub == 0 ? vi_mul(iacc[r][p], ls) : vi_add(isb[r][p], vi_mul(iacc[r][p], ls));
        }
      } else {
        for (int r = 0; r < MR; ++r)
          for (int p = 0; p < NP; ++p) isb[r][p] = iacc[r][p];
      }
    }
    V16 dw[NP], mw[NP];
    for (int p = 0; p < NP; ++p) {
      dw[p] = load_f16(reinterpret_cast<const uint16_t*>(pb[p] + base + L.d));
      if constexpr (has_min(DT)) mw[p] = load_f16(reinterpret_cast<const uint16_t*>(pb[p] + base + L.m));
    }
    for (int r = 0; r < MR; ++r) {
      const size_t bi = (size_t)rr[r] * nsb + sb;
      const V16 dx = set1(xq.d[bi]);
      for (int p = 0; p < NP; ++p) {
        acc[r][p] = fma(mul(dw[p], dx), vi_float(isb[r][p]), acc[r][p]);
        if constexpr (has_min(DT)) acc[r][p] = fma(mw[p], set1(xr.sx[bi]), acc[r][p]);
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

template <int DT, int MR, int NP, int kPrefetch = 0>
static void legacy_panels(float* out, const XRows& xr, const PackedWeight& w, int m, size_t p0, size_t p1) {
  const int N = w.rows, K = w.cols;
  const size_t panel_bytes = (size_t)(K / legacy_block_elems(DT)) * legacy_pack(DT).bytes;
  for (size_t p = p0; p < p1; p += NP) {
    int np = (int)std::min<size_t>(NP, p1 - p);
    int cols = std::min<int>(np * kPanel, N - (int)(p * kPanel));
    for (int r0 = 0; r0 < m; r0 += MR)
      micro_legacy<DT, MR, NP, kPrefetch>(out + (size_t)r0 * N + p * kPanel, N, xr, r0, std::min(MR, m - r0), K,
                                          w.data + p * panel_bytes, panel_bytes, cols, np);
  }
}

template <int DT>
static void matmul_legacy_dt(float* out, const Q8Rows& xq, const float* sx, const PackedWeight& w, int m,
                             ThreadPool& pool) {
  const size_t n_panels = ((size_t)w.rows + kPanel - 1) / kPanel;
  const size_t n_sums = (size_t)m * (w.cols / kQK);
  thread_local std::vector<int32_t> nbs;
  nbs.resize(n_sums);
  for (size_t i = 0; i < n_sums; ++i) nbs[i] = -bias<DT>() * xq.sum[i];
  const XRows xr{xq, nbs.data(), sx};
  constexpr int P = KVT_LEGACY_PREFETCH;
  parallel_for(pool, n_panels, [&](size_t b, size_t e) {
#if KVT_V16_AVX512
    if (m == 1) legacy_panels<DT, 1, 4, P>(out, xr, w, m, b, e);
    else if (m == 2) legacy_panels<DT, 2, 4, P>(out, xr, w, m, b, e);
    else if (m <= 4) legacy_panels<DT, 4, 2, P>(out, xr, w, m, b, e);
    else legacy_panels<DT, kGemmMR, kGemmNP>(out, xr, w, m, b, e);
#else
    if (m == 1) legacy_panels<DT, 1, 2, P>(out, xr, w, m, b, e);
    else if (m == 2) legacy_panels<DT, 2, 1, P>(out, xr, w, m, b, e);
    else if (m <= 4) legacy_panels<DT, 4, 1, P>(out, xr, w, m, b, e);
    else legacy_panels<DT, kGemmMR, kGemmNP>(out, xr, w, m, b, e);
#endif
  });
}

void matmul_legacy(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool) {
  const int K = w.cols, nb = K / kQK;
  thread_local std::vector<int8_t> q;
  thread_local std::vector<float> d;
  thread_local std::vector<int32_t> s;
  thread_local std::vector<float> sx;
  q.resize((size_t)m * K);
  d.resize((size_t)m * nb);
  s.resize((size_t)m * nb);
  sx.resize((size_t)m * nb);
  Q8Rows xq{q.data(), d.data(), s.data()};
  float* sxp = sx.data();  // the caller's buffer: a thread_local named inside the lambda is the worker's own
  parallel_for(pool, (size_t)m, [&](size_t b, size_t e) {
    Q8Rows part{xq.q + b * K, xq.d + b * nb, xq.sum + b * nb};
    if (w.dtype == IQ4_XS) {  // per-256 scales: d [m][K/256]
      part.d = xq.d + b * (K / kQKK);
      quantize_rows_q8k_ggml(part, x + b * K, (int)(e - b), K);
    } else {
      quantize_rows_q8(part, x + b * K, (int)(e - b), K);
      ggml_q8_scales(part.d, sxp + b * nb, part.sum, (e - b) * nb);
    }
  }, 4);
  switch (w.dtype) {
    case Q4_0: return matmul_legacy_dt<Q4_0>(out, xq, sxp, w, m, pool);
    case Q4_1: return matmul_legacy_dt<Q4_1>(out, xq, sxp, w, m, pool);
    case Q5_0: return matmul_legacy_dt<Q5_0>(out, xq, sxp, w, m, pool);
    case Q5_1: return matmul_legacy_dt<Q5_1>(out, xq, sxp, w, m, pool);
    case IQ4_NL: return matmul_legacy_dt<IQ4_NL>(out, xq, sxp, w, m, pool);
    case IQ4_XS: return matmul_legacy_dt<IQ4_XS>(out, xq, sxp, w, m, pool);
  }
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
