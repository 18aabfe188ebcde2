// dsv4_sparse_attention (see dsv4-sparse-attention.h): tokens split over the
// pool's threads, all heads of a token at once. Every head shares the token's
// keys: the dots of four keys × four heads run as sixteen independent f64
// chains (each still summed over i in order, the heads in vector lanes); the
// output rows accumulate key by key in order. Every value therefore follows the _ref
// twin's arithmetic exactly, bit for bit, for any T and thread count.
#include <cmath>
#include <vector>

#include "dsv4-sparse-attention.h"

#include "wide-clones.h"

namespace kvt {
namespace {

struct TokenScratch {
  std::vector<double> qt;  // [D][H] the token's queries in f64, transposed: a key's element i meets every head at once
  std::vector<double> e;   // [H][n] logits, then exp weights
};

constexpr int kHeadBlock = 4;  // heads per vector of f64 lanes
constexpr int kKeyBlock = 4;   // keys whose dot chains run side by side

// Every (head, key) dot is its own chain over i in order (vectorized across
// heads, interleaved across keys, never reassociated: -ffp-contract=off), so the
// logits are the _ref twin's bits; the clones only widen the lanes.
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
  const int hFull = H - H % kHeadBlock;
  for (int j0 = 0; j0 < n; j0 += kKeyBlock) {
    const float* k[kKeyBlock];
    for (int b = 0; b < kKeyBlock; ++b) k[b] = keys + (size_t)ix[j0 + b < n ? j0 + b : n - 1] * D;  // past n: re-read, discarded
    for (int h0 = 0; h0 < hFull; h0 += kHeadBlock) {
      double acc[kKeyBlock][kHeadBlock] = {};
      const double* qh = s.qt.data() + h0;
      for (int i = 0; i < D; ++i) {
        const double* qi = qh + (size_t)i * H;
        for (int b = 0; b < kKeyBlock; ++b) {
          const double ki = k[b][i];
          for (int u = 0; u < kHeadBlock; ++u) acc[b][u] += qi[u] * ki;
        }
      }
      for (int b = 0; b < kKeyBlock && j0 + b < n; ++b)
        for (int u = 0; u < kHeadBlock; ++u) e[(size_t)(h0 + u) * n + j0 + b] = acc[b][u] * scale;
    }
    for (int h = hFull; h < H; ++h) {
      for (int b = 0; b < kKeyBlock && j0 + b < n; ++b) {
        double d = 0;
        for (int i = 0; i < D; ++i) d += s.qt[(size_t)i * H + h] * (double)k[b][i];
        e[(size_t)h * n + j0 + b] = d * scale;
      }
    }
  }
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
    float* oh = out + ((size_t)t * H + h) * D;
    for (int i = 0; i < D; ++i) oh[i] = 0.0f;
    for (int j = 0; j < n; ++j) {
      const double a = eh[j] / sum;
      const float* k = keys + (size_t)ix[j] * D;
      for (int i = 0; i < D; ++i) oh[i] = (float)((double)oh[i] + a * (double)k[i]);
    }
  }
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
