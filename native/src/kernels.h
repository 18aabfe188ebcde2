// The kernel table: one instance per instruction set (scalar, avx2, avx512),
// each built from the same sources in ops/*.cc compiled with that ISA's flags
// (binding.gyp: one static library per ISA). dispatch.cc picks one at load
// time (KVTIER_NATIVE_ISA or the best the CPU has) and can switch at run time.
//
// Argument order everywhere: outputs first, then inputs, then shapes.
#pragma once
#include <cstddef>
#include <cstdint>

#include "common.h"
#include "thread-pool.h"

namespace kvt {

// A weight in the packed layout of pack_weight (ops/matmul-pack.cc):
//   F32/F16/BF16: panels of 16 rows, each [K][16] (element of row n0+j, col k at k*16+j)
//   Q8_0: panels of 16 rows, each [K/32 blocks] × { f16 d[16]; u8 q[8][16][4] }
//         where q holds w+128 and group g covers cols 32b+4g .. 32b+4g+3.
//   Q4_0/Q4_1/Q5_0/Q5_1/IQ4_NL/IQ4_XS: 4-bit codes in 16-row panels, see ops/matmul-legacy.h.
// The last panel is zero-padded to 16 rows.
struct PackedWeight {
  int dtype;
  int rows;  // N
  int cols;  // K
  const uint8_t* data;
};

size_t packed_weight_bytes(int dtype, int rows, int cols);
// dst: packed_weight_bytes(...) bytes; src: the GGUF layout [rows][cols].
void pack_weight(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, ThreadPool& pool);
// Bytes of one row of a [rows][cols] tensor of dtype in the GGUF layout.
size_t gguf_row_bytes(int dtype, int cols);

// x [m][k] f32 → q8 [m][k] int8, d [m][k/32], sum [m][k/32]  (k % 32 == 0)
void quantize_rows_q8(Q8Rows out, const float* x, int m, int k);

struct Kernels {
  const char* isa;
  // out [m][w.rows] = x [m][w.cols] · wᵀ
  void (*matmul)(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool);
  // out [rows][dim] = x / sqrt(mean(x²) + eps) * gain[dim]
  void (*rmsnorm)(float* out, const float* x, const float* gain, int rows, int dim, float eps, ThreadPool& pool);
  // x [rows][cols] in place
  void (*softmax)(float* x, int rows, int cols, ThreadPool& pool);
  // out [n] = silu(gate) * up
  void (*swiglu)(float* out, const float* gate, const float* up, size_t n, ThreadPool& pool);
  // out [n] = a + b
  void (*add)(float* out, const float* a, const float* b, size_t n, ThreadPool& pool);
  // out, q [rows][n_heads][head_dim]; pages: the KV pool base; see AttnSegment.
  void (*attention)(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                    float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool);
};

const Kernels* kernels_scalar();
const Kernels* kernels_avx2();    // off x86 these exist (built scalar) but are never selected
const Kernels* kernels_avx512();

// ---- ISA-independent kernels (cheap, memory-bound or O(rows·dim)) ----------

// RoPE with llama.cpp's scalings (ggml_rope_ext): see ops/rope-yarn.h for the
// formulas. The defaults are plain RoPE.
struct RopeParams {
  int rot_dims;                         // rotated dims per head, even, <= head_dim
  int mode;                             // 0 = normal (pairs 2i, 2i+1), 2 = neox (pairs i, i+rot/2)
  float freq_base;                      // theta base, e.g. 10000
  float freq_scale = 1.0f;              // 1/factor of linear and YaRN scaling
  float ext_factor = 0.0f;              // YaRN extrapolation mix (llama.cpp: 1 for yarn)
  float attn_factor = 1.0f;             // cos/sin magnitude
  float beta_fast = 32.0f;              // YaRN correction range
  float beta_slow = 1.0f;
  int n_ctx_orig = 0;                   // YaRN original training context
  const float* freq_factors = nullptr;  // [rot_dims/2] theta divisors (Llama 3.1 rope_freqs.weight) or null
};
// x [rows][n_heads][head_dim] in place; positions [rows].
void rope(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, const RopeParams& p,
          ThreadPool& pool);
// out [n_tok][cols] = dequantized rows tokens[i] of a GGUF table [rows][cols]
void embed(float* out, const uint8_t* table, int dtype, int rows, int cols, const int32_t* tokens, int n_tok,
           ThreadPool& pool);
// writes k, v [n][kv_heads][head_dim] (f32) for positions pos0.. into pages
void kv_write(uint8_t* pages, const KvLayout& kv, int layer, const int32_t* block_table, int n_blocks, int pos0,
              int n, const float* k, const float* v, ThreadPool& pool);
// dst [count] f32 = src (GGUF layout); count a multiple of the type's block
// (32 or 256). Every type of quant/blocks.h but Q8_K; bit-identical to ggml.
void dequantize(float* dst, const uint8_t* src, int dtype, size_t count);
// dst (GGUF layout) = src [count] f32, same types and counts; bytes identical
// to ggml's reference quantizers (quant/quant.h).
void quantize(uint8_t* dst, const float* src, int dtype, size_t count);

// ---- reference twins: plain loops over the GGUF layout, single thread -----
void matmul_ref(float* out, const float* x, const uint8_t* w_gguf, int dtype, int n, int k, int m);
void rmsnorm_ref(float* out, const float* x, const float* gain, int rows, int dim, float eps);
void softmax_ref(float* x, int rows, int cols);
void swiglu_ref(float* out, const float* gate, const float* up, size_t n);
void add_ref(float* out, const float* a, const float* b, size_t n);
void attention_ref(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                   float scale, const AttnSegment* segs, int n_segs);
void rope_ref(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, const RopeParams& p);
void embed_ref(float* out, const uint8_t* table, int dtype, int rows, int cols, const int32_t* tokens, int n_tok);
void kv_write_ref(uint8_t* pages, const KvLayout& kv, int layer, const int32_t* block_table, int n_blocks, int pos0,
                  int n, const float* k, const float* v);

}  // namespace kvt
