// One draw of a token from logits at a temperature, over the allowed ids of
// a mask (or all ids), after top-k and top-p: the sampler's law, in one fixed
// integer form so the fast kernel and its plain twin agree bit for bit.
//
//   x [n] f32 logits (after any repetition penalty); mask [ceil(n/32)] u32,
//   bit i%32 of word i/32 = id i allowed (null: every id); A = allowed ids.
//   1. m = max over A of x.
//   2. w_i = exp_kvt((x_i − m) · inv_t)  (f32, the engine's exp; w = 1 at m)
//      W_i = round-to-nearest-even(w_i · 2^40)  (integer weight, 0 ≤ W_i ≤ 2^40)
//   3. A in order x descending, lower id first on ties. k' = min(top_k, |A|)
//      (top_k 0: |A|); S = ΣW over the first k'; when top_p < 1,
//      T = ceil(top_p · S) (in f64) and k' = the fewest first elements whose
//      ΣW reaches T (none reach it: k' unchanged). K = the first k' of A.
//   4. total = ΣW over K (exact integers, so any summation order gives it);
//      target = floor(u · total / 2^64) for a uniform u64 u; walking K by id
//      ascending, the token is the first id whose running ΣW exceeds target.
//   So P(token i) = W_i / total exactly (to 2^-64): the softmax over K at
//   temperature 1/inv_t, with each weight rounded to 2^-40 of the largest.
//
// Kernels: per ISA (sample-masked.cc) the max/min scan and the weights with
// per-16-id block sums; sample-masked-select.cc cuts (bucket histogram, then
// one bucket sorted) and draws; sample-masked-ref.cc sorts all of A.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../common.h"

namespace kvt {

struct SampleParams {
  float inv_t;   // 1 / temperature, > 0
  int top_k;     // 0: off
  double top_p;  // ≥ 1: off
  uint64_t u;    // uniform draw
};

constexpr double kSampleWeightScale = 1099511627776.0;  // 2^40

// Integer weight of an exp value (step 2): w·2^40 is exact in f32, and adding then subtracting 2^52 rounds
// it to the nearest integer, ties to even (as nearbyint, without a libm call where SSE4.1 is not assumed).
inline uint64_t sample_weight(float w) {
  const double v = (double)(w * 1099511627776.0f);
  // Through int64 (the value is < 2^41): one conversion instruction, no unsigned range fix-up.
  return (uint64_t)(int64_t)((v + 4503599627370496.0) - 4503599627370496.0);
}

// The token (≥ 0), or -1 when A is empty. Not thread-safe per call site: uses thread-local scratch.
int32_t sample_masked(const float* x, const uint32_t* mask, int n, const SampleParams& p);
int32_t sample_masked_ref(const float* x, const uint32_t* mask, int n, const SampleParams& p);

// Per ISA (sample-masked.cc): over A, max, min and count; then w_i for every id (0 outside A, into w[n])
// and, per block of 16 ids, ΣW as an exact f64 integer (blocks[ceil(n/16)]).
void sample_scan(const float* x, const uint32_t* mask, int n, float* mx, float* mn, int* count);
void sample_weights(float* w, double* blocks, const float* x, const uint32_t* mask, int n, float m, float inv_t);

}  // namespace kvt
