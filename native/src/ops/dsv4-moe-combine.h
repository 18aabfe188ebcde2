// deepseek4's MoE output of T tokens: each token's routed experts' rows
// weighted in its own choice order, then the shared expert's row, the f32
// order of deepseek4Ffn in inference-core/engine/deepseek4-ffn.ts:
//
//   out [T][d]   y [T·K][d] (expert output of slot t·K + k)   w [T][K]   sy [T][d]
//
//   out_i = 0;  for k: out_i = f32(out_i + y_{tK+k,i}·w_tk)  (f64 product, exact);  out_i = f32(out_i + sy_i)
//
// Every element's sum runs in that order in both twins; the fast kernel splits
// tokens over the pool's threads and vectorizes over i: the _ref twin's bits.
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void dsv4_moe_combine(float* out, const float* y, const float* w, const float* sy, int T, int K, int d, ThreadPool& pool);
void dsv4_moe_combine_ref(float* out, const float* y, const float* w, const float* sy, int T, int K, int d);

}  // namespace kvt
