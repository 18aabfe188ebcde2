// dsv4_sparse_attention (see dsv4-sparse-attention.h): tokens split over the
// pool's threads, all heads of a token at once. Every head shares the token's
// keys, so each key row is read once for four heads whose dot products run as
// four independent f64 chains (each still summed over i in order); the output
// rows accumulate key by key in order. Every value therefore follows the _ref
// twin's arithmetic exactly, bit for bit, for any T and thread count.
#include <cmath>
#include <vector>

#include "dsv4-sparse-attention.h"

namespace kvt {
namespace {

struct TokenScratch {
  std::vector<double> qd;  // [H][D] the token's queries in f64
  std::vector<double> e;   // [H][n] logits, then exp weights
};

void attend_token(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off, const float* sinks, int t, int H,
                  int D, double scale, TokenScratch& s) {
  const int n = off[t + 1] - off[t];
  const int32_t* ix = idx + off[t];
  s.qd.resize((size_t)H * D);
  s.e.resize((size_t)H * n);
  const float* qt = q + (size_t)t * H * D;
  for (size_t i = 0; i < (size_t)H * D; ++i) s.qd[i] = qt[i];
  double* e = s.e.data();
  for (int j = 0; j < n; ++j) {
    const float* k = keys + (size_t)ix[j] * D;
    int h = 0;
    for (; h + 4 <= H; h += 4) {
      const double* q0 = &s.qd[(size_t)h * D];
      const double *q1 = q0 + D, *q2 = q1 + D, *q3 = q2 + D;
      double d0 = 0, d1 = 0, d2 = 0, d3 = 0;
      for (int i = 0; i < D; ++i) {
        const double ki = k[i];
        d0 += q0[i] * ki;
        d1 += q1[i] * ki;
        d2 += q2[i] * ki;
        d3 += q3[i] * ki;
      }
      e[(size_t)h * n + j] = d0 * scale;
      e[(size_t)(h + 1) * n + j] = d1 * scale;
      e[(size_t)(h + 2) * n + j] = d2 * scale;
      e[(size_t)(h + 3) * n + j] = d3 * scale;
    }
    for (; h < H; ++h) {
      const double* qh = &s.qd[(size_t)h * D];
      double d = 0;
      for (int i = 0; i < D; ++i) d += qh[i] * (double)k[i];
      e[(size_t)h * n + j] = d * scale;
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
