// Device-side initialisers: deterministic random weights for benchmark models
// (a 1B model's weights are generated in place instead of crossing PCIe).
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

__device__ inline uint64_t mix64(uint64_t z) {  // splitmix64 finaliser
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}
__device__ inline float unit(uint64_t seed, size_t i) {  // uniform in [-1, 1)
  return (float)(mix64(seed * 0x9e3779b97f4a7c15ull + i) >> 40) * (2.f / 16777216.f) - 1.f;
}

// element i of w.data (and of w.scales for Q8_0) from hash(seed, i); grid-stride.
__global__ void fill_random_kernel(DeviceWeight w, uint64_t seed, float scale) {
  const size_t n = (size_t)w.rows * w.cols;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x) {
    const float u = unit(seed, i) * scale;
    switch (w.type) {
      case KVT_F32: static_cast<float*>(const_cast<void*>(w.data))[i] = u; break;
      case KVT_F16: static_cast<__half*>(const_cast<void*>(w.data))[i] = __float2half_rn(u); break;
      case KVT_BF16:
        static_cast<__nv_bfloat16*>(const_cast<void*>(w.data))[i] = __float2bfloat16_rn(u);
        break;
      default:
        static_cast<int8_t*>(const_cast<void*>(w.data))[i] = (int8_t)__float2int_rn(unit(seed, i) * 127.f);
        if (i % kQ8Group == 0)
          const_cast<__half*>(w.scales)[i / kQ8Group] = __float2half_rn(scale / 127.f);
    }
  }
}

__global__ void fill_f32_kernel(float* x, size_t n, float value) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n;
       i += (size_t)gridDim.x * blockDim.x)
    x[i] = value;
}

}  // namespace

cudaError_t launch_fill_random(const DeviceWeight& w, uint64_t seed, float scale,
                               cudaStream_t stream) {
  fill_random_kernel<<<4096, 256, 0, stream>>>(w, seed, scale);
  return cudaGetLastError();
}

cudaError_t launch_fill_f32(float* x, size_t n, float value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  fill_f32_kernel<<<1024, 256, 0, stream>>>(x, n, value);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
