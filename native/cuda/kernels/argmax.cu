// Greedy pick on device, so decode copies back 4 bytes instead of the logits.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// out[rows] = argmax_j x[row, j] (lowest j on ties); grid rows, block 256.
__global__ void argmax_kernel(int32_t* out, const float* __restrict__ x, int n) {
  __shared__ float best_v[256];
  __shared__ int best_i[256];
  const float* r = x + (size_t)blockIdx.x * n;
  float bv = -INFINITY;
  int bi = 0x7fffffff;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    const float v = r[j];
    if (v > bv) { bv = v; bi = j; }  // j increases per thread: first max wins
  }
  best_v[threadIdx.x] = bv;
  best_i[threadIdx.x] = bi;
  __syncthreads();
  for (int s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) {
      const float ov = best_v[threadIdx.x + s];
      const int oi = best_i[threadIdx.x + s];
      if (ov > best_v[threadIdx.x] || (ov == best_v[threadIdx.x] && oi < best_i[threadIdx.x])) {
        best_v[threadIdx.x] = ov;
        best_i[threadIdx.x] = oi;
      }
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) out[blockIdx.x] = best_i[0] == 0x7fffffff ? 0 : best_i[0];
}

}  // namespace

cudaError_t launch_argmax(int32_t* out, const float* x, int rows, int n, cudaStream_t stream) {
  if (rows <= 0 || n <= 0) return cudaErrorInvalidValue;
  argmax_kernel<<<rows, 256, 0, stream>>>(out, x, n);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
