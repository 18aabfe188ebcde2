// SwiGLU gate of the llama feed-forward block.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// out[n] = gate[n] / (1 + exp(-gate[n])) * up[n]; out may alias gate.
__global__ void swiglu_kernel(float* out, const float* gate, const float* __restrict__ up,
                              size_t n) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float g = gate[i];
    out[i] = g / (1.f + expf(-g)) * up[i];
  }
}

}  // namespace

cudaError_t launch_swiglu(float* out, const float* gate, const float* up, size_t n,
                          cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  const size_t blocks = (n + 255) / 256;
  swiglu_kernel<<<(unsigned)(blocks < 65535 ? blocks : 65535), 256, 0, stream>>>(out, gate, up, n);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
