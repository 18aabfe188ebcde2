// Reference twins of the GEMM (tensor-core rounding) and GEMV (exact) kernels.
#include <vector>

#include "half-ref.h"
#include "ref.h"

namespace kvt_ref {

// y[M,N] (=|+=) round(X)[M,K] · round(W)[N,K]^T, accumulated in double.
void gemm(float* y, const float* x, const HostWeight& w, int m, bool accumulate) {
  const int N = w.rows, K = w.cols;
  const bool bf = w.type == KVT_BF16;
  std::vector<double> xr((size_t)m * K), wr((size_t)K);
  for (size_t i = 0; i < xr.size(); ++i) xr[i] = bf ? round_bf16(x[i]) : round_half(x[i]);
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) {
      const float v = w.at(n, k);
      wr[k] = w.type == KVT_Q8_0 ? round_half(v) : v;  // the GPU tile holds f16(d*q)
    }
    for (int r = 0; r < m; ++r) {
      double s = 0;
      const double* xrow = &xr[(size_t)r * K];
      for (int k = 0; k < K; ++k) s += xrow[k] * wr[k];
      float* dst = y + (size_t)r * N + n;
      *dst = accumulate ? (float)(*dst + s) : (float)s;
    }
  }
}

// y[M,N] (=|+=) X[M,K] · W[N,K]^T with the weights' exact values.
void gemv(float* y, const float* x, const HostWeight& w, int m, bool accumulate) {
  const int N = w.rows, K = w.cols;
  std::vector<double> wr((size_t)K);
  for (int n = 0; n < N; ++n) {
    for (int k = 0; k < K; ++k) wr[k] = w.at(n, k);
    for (int r = 0; r < m; ++r) {
      double s = 0;
      const float* xrow = x + (size_t)r * K;
      for (int k = 0; k < K; ++k) s += (double)xrow[k] * wr[k];
      float* dst = y + (size_t)r * N + n;
      *dst = accumulate ? (float)(*dst + s) : (float)s;
    }
  }
}

void matmul(float* y, const float* x, const HostWeight& w, int m, bool accumulate) {
  if (w.type == KVT_F32) gemv(y, x, w, m, accumulate);
  else gemm(y, x, w, m, accumulate);
}

}  // namespace kvt_ref
