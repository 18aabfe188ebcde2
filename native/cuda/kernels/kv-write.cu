// Appends freshly computed K/V rows to the paged KV pool (as f16).
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// k,v f32 [T,n_kv,hd] → pages[block_table[p/64]][layer][K|V][kv_head][p%64][hd], p = pos0+t.
//   grid (T, n_kv), block hd (≤ 1024).
__global__ void kv_write_kernel(PagedKv kv, const float* __restrict__ k,
                                const float* __restrict__ v, int layer, int pos0) {
  const int t = blockIdx.x, h = blockIdx.y, j = threadIdx.x;
  const int pos = pos0 + t;
  const int page = kv.block_table[pos / kPageTokens];
  __half* base = kv.pages + (size_t)page * kv.page_elems;
  const size_t src = ((size_t)t * kv.n_kv_heads + h) * kv.head_dim + j;
  base[page_offset(kv.n_kv_heads, kv.head_dim, layer, 0, h, pos % kPageTokens) + j] =
      __float2half_rn(k[src]);
  base[page_offset(kv.n_kv_heads, kv.head_dim, layer, 1, h, pos % kPageTokens) + j] =
      __float2half_rn(v[src]);
}

}  // namespace

cudaError_t launch_kv_write(const PagedKv& kv, const float* k, const float* v, int layer, int t,
                            int pos0, cudaStream_t stream) {
  if (t <= 0 || kv.head_dim > 1024 || (pos0 + t - 1) / kPageTokens >= kv.n_blocks)
    return cudaErrorInvalidValue;
  kv_write_kernel<<<dim3(t, kv.n_kv_heads), kv.head_dim, 0, stream>>>(kv, k, v, layer, pos0);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
