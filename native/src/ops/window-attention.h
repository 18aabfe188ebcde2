// Sliding-window causal GQA attention over paged KV, and the two elementwise
// ops Gemma 3 needs beside it (geglu with ggml's f16 GELU table, scale).
// Plain kernels, compiled once (no per-ISA variants): the windowed models
// kvtier runs are small; a per-ISA fast path can replace window_attention
// later and must then equal window_attention_ref bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../common.h"
#include "../thread-pool.h"

namespace kvt {

// out, q [rows][n_heads][head_dim], rows in segment order (AttnSegment.q_row0).
// Query at position p attends keys [lo, p] with lo = window > 0 ? max(0, p − window + 1) : 0,
// which is llama.cpp's LLAMA_SWA_TYPE_STANDARD mask (key j masked when p − j >= n_swa).
// Per (row, head), the order of attention_ref over those keys:
//   s_j = (q·k_j in lanes d%16, fmaf, then reduce16) · scale
//   softmax_scores_ref(s)  (max scan, exp_kvt, Σ in lanes j%16)
//   o = Σ_j fmaf(e_j, v_j) sequential j;  out = o · (1/Σ)
// sinks (nullable, [n_heads]): gpt-oss's attention sinks, one extra logit per
// head in the softmax with no value (softmax_scores_sink_ref); null = none.
// attention_ref is this function with window 0 and no sinks (attention-ref.cc calls it).
void window_attention(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                      float scale, int window, const AttnSegment* segs, int n_segs, ThreadPool& pool,
                      const float* sinks = nullptr);
void window_attention_ref(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer,
                          int n_heads, float scale, int window, const AttnSegment* segs, int n_segs,
                          const float* sinks = nullptr);

// out[n] = gelu16(gate[n]) · up[n], ggml's GGML_GELU_FP16 geglu:
//   gate <= −10 → 0;  gate >= 10 → gate·up;
//   else f16→f32(table[f32→f16(gate)]) · up, table[h] = f32→f16(0.5x(1+tanhf(√(2/π)·x·(1+0.044715x²)))), x = f16→f32(h)
void geglu(float* out, const float* gate, const float* up, size_t n, ThreadPool& pool);
void geglu_ref(float* out, const float* gate, const float* up, size_t n);

// out[n] = x[n] · s  (out may alias x)
void scale(float* out, const float* x, float s, size_t n, ThreadPool& pool);
void scale_ref(float* out, const float* x, float s, size_t n);

}  // namespace kvt
