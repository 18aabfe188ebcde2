// Small int32 copies done by the SMs instead of a copy engine. The forward
// pass reads its tokens and block table from mapped pinned memory this way so
// it never queues behind a bulk KV import/export on the DMA engines.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// dst[n] = src[n]; src may be mapped host memory. grid-stride, block 256.
__global__ void copy_i32_kernel(int32_t* __restrict__ dst, const int32_t* __restrict__ src, int n) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += gridDim.x * blockDim.x) dst[i] = src[i];
}

}  // namespace

cudaError_t launch_copy_i32(int32_t* dst, const int32_t* src, int n, cudaStream_t stream) {
  if (n <= 0) return cudaSuccess;
  const int blocks = (n + 255) / 256;
  copy_i32_kernel<<<blocks < 1024 ? blocks : 1024, 256, 0, stream>>>(dst, src, n);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
