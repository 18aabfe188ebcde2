// Numerically stable row softmax (sampling temperature is applied by the caller).
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// x[rows,n] ← exp(x - max_row) / sum_row;  grid rows, block 256.
__global__ void softmax_kernel(float* x, int n) {
  __shared__ float scratch[32];
  float* r = x + (size_t)blockIdx.x * n;
  float mx = -INFINITY;
  for (int j = threadIdx.x; j < n; j += blockDim.x) mx = fmaxf(mx, r[j]);
  mx = block_max(mx, scratch);
  float s = 0.f;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float e = expf(r[j] - mx);
    r[j] = e;
    s += e;
  }
  s = block_sum(s, scratch);
  const float inv = 1.f / s;
  for (int j = threadIdx.x; j < n; j += blockDim.x) r[j] *= inv;
}

}  // namespace

cudaError_t launch_softmax(float* x, int rows, int n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaErrorInvalidValue;
  softmax_kernel<<<rows, 256, 0, stream>>>(x, n);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
