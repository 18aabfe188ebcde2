// Shared device-side definitions of the kvtier CUDA kernels.
//
// Conventions every kernel follows (so the ops compose without reshuffling):
//   * activations are f32, row-major [tokens][features];
//   * weights are row-major [out_features][in_features] (the GGUF/ggml order),
//     so a linear layer is  Y[M,N] = X[M,K] · W[N,K]^T;
//   * KV pages are f16, one page = one 64-token block of every layer:
//       page[layer][K|V][kv_head][64 tokens][head_dim]
//     which is byte-for-byte the KV payload of a kvtier block, so importing a
//     cached block is a single host→device copy into a page.
#pragma once
#include <cuda_runtime.h>
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include <cstdint>

#include "../kvt-cuda-types.h"

namespace kvt_cuda {

// Tokens per KV page (= kvtier block size B). The page layout above and the
// attention kernel's chunking both depend on it.
constexpr int kPageTokens = KVT_PAGE_TOKENS;
// The Q8_0 quantisation group (ggml): 32 int8 values share one f16 scale.
constexpr int kQ8Group = 32;

// A weight matrix resident in device memory.
// Q8_0 is repacked at upload (see q8-repack) from ggml's 34-byte blocks into
// two aligned planes so kernels can use 16-byte loads:
//   data   = int8 [rows][cols]
//   scales = f16  [rows][cols/32]
// For F32/F16/BF16 `data` is [rows][cols] of that type and scales is null.
struct DeviceWeight {
  int type;              // kvt_dtype
  int rows;              // N (output features)
  int cols;              // K (input features)
  const void* data;
  const __half* scales;
};

// Where a sequence's KV lives: pages + its block table (page id per block).
struct PagedKv {
  __half* pages;         // base of the page pool
  size_t page_elems;     // halves per page = layers*2*kv_heads*64*head_dim
  const int32_t* block_table;  // [n_blocks] page id of block i of the sequence
  int n_blocks;
  int n_layers;
  int n_kv_heads;
  int head_dim;
};

// Offset (in halves) of token `pos` of (layer, k_or_v, kv_head) inside its page.
__host__ __device__ inline size_t page_offset(int n_kv_heads, int head_dim, int layer,
                                              int kv, int kv_head, int pos_in_page) {
  return ((((size_t)layer * 2 + kv) * n_kv_heads + kv_head) * kPageTokens + pos_in_page) *
         (size_t)head_dim;
}

__device__ inline float warp_sum(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ inline float warp_max(float v) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Block-wide reduction for blockDim.x a multiple of 32 (≤ 1024): each warp
// reduces its lanes, warp 0 reduces the warps' results through `scratch`
// (32 floats); lanes past the last warp hold `identity`.
template <typename WarpReduce>
__device__ inline float block_reduce(float v, float* scratch, float identity, WarpReduce warp_reduce) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  v = warp_reduce(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  const int n_warps = blockDim.x >> 5;
  v = lane < n_warps ? scratch[lane] : identity;
  return warp_reduce(v);
}
__device__ inline float block_sum(float v, float* scratch) {
  return block_reduce(v, scratch, 0.f, [](float x) { return warp_sum(x); });
}
__device__ inline float block_max(float v, float* scratch) {
  return block_reduce(v, scratch, -INFINITY, [](float x) { return warp_max(x); });
}

__device__ inline float bf16_bits_to_float(uint16_t b) {
  return __uint_as_float((uint32_t)b << 16);
}

}  // namespace kvt_cuda
