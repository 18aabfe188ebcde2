// Residual add.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// out[n] = a[n] + b[n]  (out may alias a or b)
__global__ void add_kernel(float* out, const float* a, const float* b, size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    out[i] = a[i] + b[i];
}

}  // namespace

cudaError_t launch_add(float* out, const float* a, const float* b, size_t n, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = (n + 255) / 256;
  add_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(out, a, b, n);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
