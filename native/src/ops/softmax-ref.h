// Steps shared by the plain twins softmax-ref.cc, attention-ref.cc and
// mla-attention-ref.cc. One copy of the order of operations, so the twins
// cannot drift from each other (the ISA kernels copy this order bit for bit).
#pragma once

#include <cstring>

#include "../common.h"

namespace kvt {

// s[0..n) := exp_kvt(s − m); returns 1/Σ, Σ summed in lanes j%16 then reduce16.
inline float exp_shift_inv_sum_ref(float* s, int n, float m) {
  float lanes[16] = {0};
  for (int j = 0; j < n; ++j) {
    s[j] = exp_kvt(s[j] - m);
    lanes[j % 16] += s[j];
  }
  return 1.0f / reduce16(lanes);
}

// Attention scores s[0..n), n ≥ 1: max by a scan from s[0] (a NaN there stays,
// later NaNs are skipped), then exp_shift_inv_sum_ref.
inline float softmax_scores_ref(float* s, int n) {
  float m = s[0];
  for (int j = 1; j < n; ++j) m = s[j] > m ? s[j] : m;
  return exp_shift_inv_sum_ref(s, n, m);
}

// softmax_scores_ref with an attention sink (gpt-oss): a logit `sink` that
// joins the max and the denominator and has no value row, as ggml's soft_max
// with sinks computes it: m = max(max_j s_j, sink); Σ = Σ_j e_j (lanes j%16,
// reduce16) + exp_kvt(sink − m); returns 1/Σ.
inline float softmax_scores_sink_ref(float* s, int n, float sink) {
  float m = s[0];
  for (int j = 1; j < n; ++j) m = s[j] > m ? s[j] : m;
  m = sink > m ? sink : m;
  float lanes[16] = {0};
  for (int j = 0; j < n; ++j) {
    s[j] = exp_kvt(s[j] - m);
    lanes[j % 16] += s[j];
  }
  return 1.0f / (reduce16(lanes) + exp_kvt(sink - m));
}

// Element idx of a KV page pool stored as f32 or f16.
inline float page_elem_at(const uint8_t* pages, int dtype, size_t idx) {
  if (dtype == F32) {
    float f;
    std::memcpy(&f, pages + idx * 4, 4);
    return f;
  }
  uint16_t h;
  std::memcpy(&h, pages + idx * 2, 2);
  return f16_to_f32(h);
}

}  // namespace kvt
