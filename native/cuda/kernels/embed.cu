// Token embedding gather.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// out[T,d] = float(table[tokens[t]][:]); table [n_vocab][d] of F32|F16|BF16|Q8_0 planes.
//   grid T, block 256. Out-of-range token ids were rejected on the host.
__global__ void embed_kernel(float* __restrict__ out, DeviceWeight table,
                             const int32_t* __restrict__ tokens) {
  const int t = blockIdx.x, d = table.cols;
  const size_t row = (size_t)tokens[t];
  float* o = out + (size_t)t * d;
  for (int j = threadIdx.x; j < d; j += blockDim.x) {
    const size_t i = row * d + j;
    float v;
    switch (table.type) {
      case KVT_F32: v = static_cast<const float*>(table.data)[i]; break;
      case KVT_F16: v = __half2float(static_cast<const __half*>(table.data)[i]); break;
      case KVT_BF16: v = bf16_bits_to_float(static_cast<const uint16_t*>(table.data)[i]); break;
      default:
        v = __half2float(table.scales[row * (d / kQ8Group) + j / kQ8Group]) *
            (float)static_cast<const int8_t*>(table.data)[i];
    }
    o[j] = v;
  }
}

}  // namespace

cudaError_t launch_embed(float* out, const DeviceWeight& table, const int32_t* tokens, int t,
                         cudaStream_t stream) {
  if (t <= 0) return cudaErrorInvalidValue;
  embed_kernel<<<t, 256, 0, stream>>>(out, table, tokens);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
