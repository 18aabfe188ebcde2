// RMSNorm (llama): normalise each row by its root mean square, then scale.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// y[T,d] = x[T,d] * rsqrt(mean_j(x[t,j]^2) + eps) * w[d]
//   grid T, block 256; y may alias x.
__global__ void rmsnorm_kernel(float* y, const float* x, const float* __restrict__ w, int d,
                               float eps) {
  __shared__ float scratch[32];
  const float* xr = x + (size_t)blockIdx.x * d;
  float* yr = y + (size_t)blockIdx.x * d;
  float ss = 0.f;
  for (int j = threadIdx.x; j < d; j += blockDim.x) ss += xr[j] * xr[j];
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / (float)d + eps);
  for (int j = threadIdx.x; j < d; j += blockDim.x) yr[j] = xr[j] * inv * w[j];
}

}  // namespace

cudaError_t launch_rmsnorm(float* y, const float* x, const float* w, int t, int d, float eps,
                           cudaStream_t stream) {
  if (t <= 0 || d <= 0) return cudaErrorInvalidValue;
  rmsnorm_kernel<<<t, 256, 0, stream>>>(y, x, w, d, eps);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
