// dsv4_sparse_attention (see dsv4-sparse-attention.h): tokens split over the
// pool's threads, all heads of a token at once. Every head shares the token's
// keys: the dots of eight keys × eight heads run as 64 independent f64 chains
// (each still summed over i in order, the heads in vector lanes; four-head
// blocks and four-key blocks take what remains); the output rows accumulate
// key by key in order, eight elements of eight heads held in registers. Every value therefore follows the _ref
// twin's arithmetic exactly, bit for bit, for any T and thread count.
#include <cmath>
#include <cstring>
#include <vector>

#include "dsv4-sparse-attention.h"

#include "wide-clones.h"

namespace kvt {
namespace {

struct TokenScratch {
  std::vector<double> qt;  // [D][H] the token's queries in f64, transposed: a key's element i meets every head at once
  std::vector<double> e;   // [H][n] logits, then exp weights
};

// Every (head, key) dot is its own chain over i in order (vectorized across
// heads, interleaved across keys, never reassociated: -ffp-contract=off), so the
// logits are the _ref twin's bits; the clones only widen the lanes.
//
//   e[h][j0 + b] = (Σ_i qt[i][h]·k_b[i]) · scale   for h in [h0, h0 + HB), b < KB
//
// HB heads in the lanes of one vector (8: one AVX-512 register of f64, 4: one
// AVX2 one), KB keys side by side: KB independent add chains per i hide the
// add's latency.
template <int HB, int KB>
__attribute__((always_inline)) static inline void dots(double* e, const double* qt, const float* const* k, int h0, int H, int D, int n, int j0, double scale) {
  double acc[KB][HB] = {};
  const double* qh = qt + h0;
  for (int i = 0; i < D; ++i) {
    const double* qi = qh + (size_t)i * H;
    for (int b = 0; b < KB; ++b) {
      const double ki = k[b][i];
      for (int u = 0; u < HB; ++u) acc[b][u] += qi[u] * ki;
    }
  }
  for (int b = 0; b < KB && j0 + b < n; ++b)
    for (int u = 0; u < HB; ++u) e[(size_t)(h0 + u) * n + j0 + b] = acc[b][u] * scale;
}

// The logits of one block of up to KB keys for every head: heads in blocks of
// 8 while 8 remain, then of 4, then one by one. Which block a head falls in
// never changes its chain, so any H gives the _ref twin's bits.
template <int KB>
__attribute__((always_inline)) static inline void key_block(double* e, const double* qt, const float* keys, const int32_t* ix, int H, int D, int n, int j0, double scale) {
  const float* k[KB];
  for (int b = 0; b < KB; ++b) k[b] = keys + (size_t)ix[j0 + b < n ? j0 + b : n - 1] * D;  // past n: re-read, discarded
  int h0 = 0;
  for (; h0 + 8 <= H; h0 += 8) dots<8, KB>(e, qt, k, h0, H, D, n, j0, scale);
  for (; h0 + 4 <= H; h0 += 4) dots<4, KB>(e, qt, k, h0, H, D, n, j0, scale);
  for (; h0 < H; ++h0) {
    for (int b = 0; b < KB && j0 + b < n; ++b) {
      double d = 0;
      for (int i = 0; i < D; ++i) d += qt[(size_t)i * H + h0] * (double)k[b][i];
      e[(size_t)h0 * n + j0 + b] = d * scale;
    }
  }
}

// The output rows of heads [h0, h0 + HB) of one token:
//
//   ot [H][D]   a [H][n] (softmax weights)   keys[ix[j]] [D]
//   ot[h][i] = 0, then for j in order: ot[h][i] = f32(ot[h][i] + a[h][j]·k_j[i])   (f64 product and sum)
//
// Eight elements of every head of the block stay in registers (as f64 values an
// f32 holds exactly) over all n keys, each key's eight elements converted to
// f64 once for the HB heads: the twin's arithmetic per element, in its order,
// without a store and reload of the row per key. Elements past the last
// multiple of 8 go one by one, the same way.
template <int HB>
__attribute__((always_inline)) static inline void weighted_sum(float* ot, const double* a, const float* keys, const int32_t* ix, int n, int h0,
                                                               int D) {
  typedef double v8d __attribute__((vector_size(64)));
  typedef float v8f __attribute__((vector_size(32)));
  const int dFull = D - D % 8;
  for (int i0 = 0; i0 < dFull; i0 += 8) {
    v8d acc[HB];
    for (int u = 0; u < HB; ++u) acc[u] = v8d{} ;
    for (int j = 0; j < n; ++j) {
      v8f kf;
      std::memcpy(&kf, keys + (size_t)ix[j] * D + i0, sizeof kf);
      const v8d kd = __builtin_convertvector(kf, v8d);
      for (int u = 0; u < HB; ++u) {
        const v8d p = a[(size_t)(h0 + u) * n + j] * kd;
        acc[u] = __builtin_convertvector(__builtin_convertvector(acc[u] + p, v8f), v8d);
      }
    }
    for (int u = 0; u < HB; ++u) {
      const v8f r = __builtin_convertvector(acc[u], v8f);
      std::memcpy(ot + (size_t)(h0 + u) * D + i0, &r, sizeof r);
    }
  }
  for (int i = dFull; i < D; ++i)
    for (int u = 0; u < HB; ++u) {
      float o = 0.0f;
      for (int j = 0; j < n; ++j) o = (float)((double)o + a[(size_t)(h0 + u) * n + j] * (double)keys[(size_t)ix[j] * D + i]);
      ot[(size_t)(h0 + u) * D + i] = o;
    }
}

KVT_WIDE_CLONES
void attend_token(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off, const float* sinks, int t, int H,
                  int D, double scale, TokenScratch& s) {
  const int n = off[t + 1] - off[t];
  const int32_t* ix = idx + off[t];
  s.qt.resize((size_t)H * D);
  s.e.resize((size_t)H * n);
  const float* qt = q + (size_t)t * H * D;
  for (int h = 0; h < H; ++h)
    for (int i = 0; i < D; ++i) s.qt[(size_t)i * H + h] = qt[(size_t)h * D + i];
  double* e = s.e.data();
  // eight keys side by side (8 chains of one 8-head vector each), the last < 8 keys four at a time
  int j0 = 0;
  for (; j0 + 8 <= n; j0 += 8) key_block<8>(e, s.qt.data(), keys, ix, H, D, n, j0, scale);
  for (; j0 < n; j0 += 4) key_block<4>(e, s.qt.data(), keys, ix, H, D, n, j0, scale);
  for (int h = 0; h < H; ++h) {
    double* eh = e + (size_t)h * n;
    double m = sinks[h];
    for (int j = 0; j < n; ++j)
      if (eh[j] > m) m = eh[j];
    double sum = std::exp((double)sinks[h] - m);
    for (int j = 0; j < n; ++j) {
      eh[j] = std::exp(eh[j] - m);
      sum += eh[j];
    }
    for (int j = 0; j < n; ++j) eh[j] = eh[j] / sum;  // a_hj, the same quotient the twin forms per step
  }
  // out rows: heads in blocks of 8 (then 4, then 1), 8 elements at a time held in registers over the keys
  float* ot = out + (size_t)t * H * D;
  int h0 = 0;
  for (; h0 + 8 <= H; h0 += 8) weighted_sum<8>(ot, e, keys, ix, n, h0, D);
  for (; h0 + 4 <= H; h0 += 4) weighted_sum<4>(ot, e, keys, ix, n, h0, D);
  for (; h0 < H; ++h0) weighted_sum<1>(ot, e, keys, ix, n, h0, D);
}

}  // namespace

void dsv4_sparse_attention(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                           const float* sinks, int T, int H, int D, double scale, ThreadPool& pool) {
  parallel_for_dynamic(pool, (size_t)T, 1, [&](size_t b, size_t e) {
    thread_local TokenScratch scratch;
    for (size_t t = b; t < e; ++t) attend_token(out, q, keys, idx, off, sinks, (int)t, H, D, scale, scratch);
  });
}

}  // namespace kvt
