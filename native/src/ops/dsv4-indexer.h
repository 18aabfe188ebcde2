// deepseek4 (DeepSeek V4) lightning indexer of T tokens: each token's top-k
// finished CSA indexer keys, the entries its sparse attention reads.
//
//   sel   [T][k]       out: token t's picks (the first min(n[t], k) are written)
//   q     [T][H][D]    the tokens' indexer queries, roped at their positions
//   w     [T][H]       the tokens' head weights
//   keys  [n_keys][D]  the layer's indexer keys in order (a packed pool)
//   n     [T]          token t chooses among keys[0 .. n[t])
//
// n[t] ≤ k: sel = 0, 1, …, n[t]−1 (q and w of t are not read). Otherwise, in
// this order (the TypeScript reference indexerTopK / topK in
// inference-core/engine/deepseek4-compressor.ts does the same arithmetic):
//   dot_hj = Σ_i q_hi·k_ji            (f64, sequential i; each product exact)
//   acc_j  = Σ_h [dot_hj > 0] (dot_hj·w_h)·scale   (f64, sequential h)
//   s_j    = f32(acc_j)
//   sel    = the first k of libstdc++'s std::partial_sort(ids, ids+k, ids+n)
//            with s[a] > s[b] (heap select, heap order, not sorted), which is
//            the set and order ggml_top_k gives, ties included.
// The fast kernel splits tokens over threads and scores four keys at a time
// (four independent dot chains, each in the order above), so it equals the
// _ref twin bit for bit for any T and thread count.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../thread-pool.h"

namespace kvt {

void dsv4_indexer_topk(int32_t* sel, const float* q, const float* w, const float* keys, const int32_t* n, int T, int H, int D, int k,
                       double scale, ThreadPool& pool);
void dsv4_indexer_topk_ref(int32_t* sel, const float* q, const float* w, const float* keys, const int32_t* n, int T, int H, int D, int k,
                           double scale);

// The heap select of one token: ids[0..k) ← the picks, given scores s[0..n) (n > k ≥ 1); ids: scratch of n.
void dsv4_indexer_select(int32_t* ids, const float* s, int n, int k);

}  // namespace kvt
