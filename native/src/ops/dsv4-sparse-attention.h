// deepseek4 (DeepSeek V4) attention of T tokens over the keys each one selects:
// its SWA window rows plus the compressed entries (all HCA entries, or the
// lightning indexer's top-k CSA entries). One KV head shared by every query
// head, V is K, one sink logit per head.
//
//   out, q  [T][H][D]      keys [n_keys][D] (a packed pool)
//   idx     [off[T]]       token t attends keys idx[off[t] .. off[t+1])
//   sinks   [H]
//
// Per (t, h), in this order (the TypeScript reference attendOne in
// inference-core/engine/deepseek4-attention.ts does the same arithmetic):
//   s_j = (Σ_i q_i·k_ji in f64, sequential i) · scale      (f64)
//   m = max(sink_h, s_j …);  e_j = exp(s_j − m);  Σ = exp(sink_h − m) + Σ_j e_j  (f64, sequential j)
//   out_i = 0, then for j in order: out_i = f32(out_i + (e_j / Σ)·k_ji)
// The fast kernel splits tokens over threads and computes all heads of a token
// together (up to eight keys × eight heads as independent dot chains, each in the order above),
// so it equals the _ref twin bit for bit for any T and thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../thread-pool.h"

namespace kvt {

void dsv4_sparse_attention(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                           const float* sinks, int T, int H, int D, double scale, ThreadPool& pool);
void dsv4_sparse_attention_ref(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                               const float* sinks, int T, int H, int D, double scale);

// One (t, h) pair of the above; e: scratch of at least off[t+1] − off[t] doubles.
void dsv4_sparse_attention_pair(float* out, const float* q, const float* keys, const int32_t* idx, const int32_t* off,
                                const float* sinks, int t, int h, int H, int D, double scale, double* e);

}  // namespace kvt
