// Plain C++ reference twins of the CUDA kernels (one file per op beside this
// header). Same layouts and the same rounding points as the device code, with
// double accumulation, so a kernel can be checked to a tight tolerance.
#pragma once
#include <cstddef>
#include <cstdint>
#include <vector>

#include "../kvt-cuda-types.h"

namespace kvt_ref {

// A weight matrix in host memory in its GGUF/ggml layout: [rows][cols] of F32,
// F16 or BF16, or rows of cols/32 packed 34-byte Q8_0 blocks.
struct HostWeight {
  int type = KVT_F32;
  int rows = 0;
  int cols = 0;
  std::vector<uint8_t> raw;
  // Element (n, k) as the GEMV kernel sees it (exact f32 value).
  float at(int n, int k) const;
  size_t bytes() const { return raw.size(); }
};
size_t weight_bytes(int type, int rows, int cols);

// The paged KV pool on the host: pages[page][layer][K|V][kv_head][64][head_dim] of f16 bits.
struct HostPagedKv {
  uint16_t* pages = nullptr;
  size_t page_elems = 0;
  const int32_t* block_table = nullptr;
  int n_blocks = 0;
  int n_layers = 0;
  int n_kv_heads = 0;
  int head_dim = 0;
};
size_t page_offset(int n_kv_heads, int head_dim, int layer, int kv, int kv_head, int pos_in_page);

// Twin of launch_gemm and launch_gemm_skinny: X rounded to f16 (bf16 for BF16 W),
// Q8_0 dequantised to f16.
void gemm(float* y, const float* x, const HostWeight& w, int m, bool accumulate);
// Twin of launch_gemv: exact f32 operands.
void gemv(float* y, const float* x, const HostWeight& w, int m, bool accumulate);
// Twin of launch_matmul: F32 weights → gemv, all others → gemm, for every M.
void matmul(float* y, const float* x, const HostWeight& w, int m, bool accumulate);

void rmsnorm(float* y, const float* x, const float* w, int t, int d, float eps);
void rope(float* x, const int32_t* positions, int rows, int heads, int hd, int rot, float base, int mode);
void swiglu(float* out, const float* gate, const float* up, size_t n);
void add(float* out, const float* a, const float* b, size_t n);
void embed(float* out, const HostWeight& table, const int32_t* tokens, int t);
void softmax(float* x, int rows, int n);
void argmax(int32_t* out, const float* x, int rows, int n);
void kv_write(const HostPagedKv& kv, const float* k, const float* v, int layer, int t, int pos0);
void attention(float* out, const float* q, const HostPagedKv& kv, int layer, int t, int n_head,
               int pos0, float scale);

}  // namespace kvt_ref
