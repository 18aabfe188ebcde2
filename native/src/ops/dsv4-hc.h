// deepseek4 hyper-connections: the hc residual streams of T rows collapsed into
// the block's input, and the block's output expanded back into hc streams.
//
//   H, out [T][hc][d]   X, Y [T][d]   pre, post [T][hc]   comb [T][hc·hc] (src-major: dst + hc·src)
//
//   collapse: X[t][i] = Σ_h H[t][h][i]·pre[t][h]                 h in order, each step in f64 rounded to f32
//   expand:   out[t][dst][i] = Y[t][i]·post[t][dst] + Σ_src H[t][src][i]·comb[t][dst + hc·src]
//                                                              in f64, src in order, rounded to f32 once
// The TypeScript twin (Deepseek4Forward.collapse / hcBlock in
// inference-core/engine/deepseek4-forward.ts) does the same arithmetic; the two
// agree bit for bit (test/native/dsv4-hc.test.ts).
// Rows are split over the pool's threads, each row whole on one thread: the same
// bits for any thread count.
#pragma once
#include <cstddef>

#include "../thread-pool.h"

namespace kvt {

void dsv4_hc_collapse(float* X, const float* H, const float* pre, int T, int hc, int d, ThreadPool& pool);
void dsv4_hc_expand(float* out, const float* Y, const float* H, const float* post, const float* comb, int T, int hc, int d, ThreadPool& pool);

}  // namespace kvt
