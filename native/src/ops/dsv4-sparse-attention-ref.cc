// Reference twin of dsv4_sparse_attention (see dsv4-sparse-attention.h): one
// thread, pairs in (t, h) order, plain loops.
#include <cmath>
#include <vector>

#include "dsv4-sparse-attention.h"

namespace kvt {

void dsv4_sparse_attention_pair(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                                const float* sinks, int t, int h, int H, int D, double scale, double* e) {
  const int n = off[t + 1] - off[t];
  const int32_t* ix = idx + off[t];
  const float* qh = q + ((size_t)t * H + h) * D;
  float* oh = out + ((size_t)t * H + h) * D;
  double m = sinks[h];
  for (int j = 0; j < n; ++j) {
    const float* k = keys + (size_t)ix[j] * D;
    double dot = 0;
    for (int i = 0; i < D; ++i) dot += (double)qh[i] * (double)k[i];
    e[j] = dot * scale;
    if (e[j] > m) m = e[j];
  }
  double sum = std::exp((double)sinks[h] - m);
  for (int j = 0; j < n; ++j) {
    e[j] = std::exp(e[j] - m);
    sum += e[j];
  }
  for (int i = 0; i < D; ++i) oh[i] = 0.0f;
  for (int j = 0; j < n; ++j) {
    const double a = e[j] / sum;
    const float* k = keys + (size_t)ix[j] * D;
    for (int i = 0; i < D; ++i) oh[i] = (float)((double)oh[i] + a * (double)k[i]);
  }
}

void dsv4_sparse_attention_ref(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                               const float* sinks, int T, int H, int D, double scale) {
  std::vector<double> e;
  for (int t = 0; t < T; ++t) {
    e.resize((size_t)(off[t + 1] - off[t]) + 1);
    for (int h = 0; h < H; ++h) dsv4_sparse_attention_pair(out, q, keys, idx, off, sinks, t, h, H, D, scale, e.data());
  }
}

}  // namespace kvt
