// Softmax of one row of attention scores, per ISA: shared by ops/attention.cc
// and ops/mla-attention.cc, the fast twins of softmax_scores_ref
// (softmax-ref.h). Compiled once per ISA (KVT_ISA_NS), like its includers.
// Same values as the twin: the scan max, exp_kvt (exp16 per lane) and the
// Σ in lanes j%16, each lane summing s[l], s[l+16], … in order.
#pragma once

#include "../simd/v16.h"

namespace kvt {
namespace KVT_ISA_NS {

// s[0..n) := exp(s − max); returns 1/Σ.
inline float softmax_scores(float* s, int n) {
  using namespace simd;
  // The max is exact, so 16 lanes give the value of the reference's scan:
  // lanes start at s[0] (a NaN there stays, as in the scan) and max(new,
  // running) keeps the running value when new is NaN (the scan skips it). A
  // +0/−0 tie may keep the other zero; s − m and exp(s − m) cannot tell.
  float m;
  int j0 = 0;
  {
    V16 vm = set1(s[0]);
    for (; j0 + 16 <= n; j0 += 16) vm = max(load(s + j0), vm);
    m = reduce_max(vm);
  }
  for (; j0 < n; ++j0) m = s[j0] > m ? s[j0] : m;
  V16 vm = set1(m);
  V16 sum = zero();
  int j = 0;
  for (; j + 16 <= n; j += 16) {
    V16 e = exp16(sub(load(s + j), vm));
    store(s + j, e);
    sum = add(sum, e);
  }
  if (j < n) {
    float tmp[16];
    store(tmp, exp16(sub(load_n(s + j, n - j), vm)));
    for (int t = n - j; t < 16; ++t) tmp[t] = 0.0f;
    V16 e = load(tmp);
    store_n(s + j, e, n - j);
    sum = add(sum, e);
  }
  return 1.0f / reduce_sum(sum);
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
