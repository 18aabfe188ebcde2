// deepseek4 hyper-connection mix weights of T rows from their mixes (the
// hc_fn projection of the normed streams), the arithmetic of hcWeights in
// inference-core/engine/deepseek4-math.ts (ggml_dsv4_hc_comb's order):
//
//   mixes [T][nMix]   nMix = (2 + hc)·hc with comb, hc without (the LM head's mixer)
//   scale [3]  base [nMix]
//   pre [T][hc]   post [T][hc]   comb [T][hc·hc] (dst + hc·src); post and comb only with comb
//
//   pre_h  = f32(σ(m_h·s0 + b_h) + eps)          σ(x) = 1 / (1 + exp(−x)), all in f64
//   post_h = f32(2·σ(m_{hc+h}·s1 + b_{hc+h}))
//   comb: per src, v = m·s2 + b (f64), stored f32; softmax over dst with the f64 max
//         (each exp stored f32, sum in f64 in dst order), + eps; then Sinkhorn:
//         columns, then (rows, columns) × (iters − 1), each sum from eps in order,
//         every quotient stored f32.
//
// exp is the C library's, the TypeScript twin's is V8's: the two agree but for
// exp's last f64 bit (test/native/dsv4-rows.test.ts states the tolerance); the
// fast kernel (rows over threads) equals the _ref twin bit for bit.
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void dsv4_hc_weights(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int T, int hc,
                     double eps, int iters, bool with_comb, ThreadPool& pool);
void dsv4_hc_weights_ref(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int T, int hc,
                         double eps, int iters, bool with_comb);
// Row t of the above.
void dsv4_hc_weights_row(float* pre, float* post, float* comb, const float* mixes, const float* scale, const float* base, int t, int hc,
                         double eps, int iters, bool with_comb);

}  // namespace kvt
