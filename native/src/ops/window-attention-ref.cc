// Reference twins of ops/window-attention.cc: one (row, head) at a time over
// the pool's elements, plain loops, single thread; geglu with the GELU
// computed from its formula per element (no table), rounded as the table is.
#include <algorithm>
#include <cmath>
#include <vector>

#include "window-attention.h"
#include "softmax-ref.h"

namespace kvt {

void window_attention_ref(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer,
                          int n_heads, float scale_, int window, const AttnSegment* segs, int n_segs,
                          const float* sinks) {
  const int D = kv.head_dim;
  const int group = n_heads / kv.kv_heads;
  const size_t page_elems = kv.page_elems();
  std::vector<float> s;
  std::vector<float> o(D);
  for (int sg = 0; sg < n_segs; ++sg) {
    const AttnSegment& seg = segs[sg];
    for (int i = 0; i < seg.n_q; ++i) {
      const size_t row = (size_t)seg.q_row0 + i;
      const int pos = seg.pos0 + i;
      const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      const int n = pos + 1 - lo;
      for (int h = 0; h < n_heads; ++h) {
        const float* qh = q + (row * n_heads + h) * D;
        const int kvh = h / group;
        s.assign(n, 0.0f);
        for (int j = 0; j < n; ++j) {
          const int key = lo + j;
          const size_t base = (size_t)seg.block_table[key / kPageTokens] * page_elems + kv.offset(layer, 0, kvh, key % kPageTokens);
          float lanes[16] = {0};
          for (int d = 0; d < D; ++d) lanes[d % 16] = std::fmaf(qh[d], page_elem_at(pages, kv.dtype, base + d), lanes[d % 16]);
          s[j] = reduce16(lanes) * scale_;
        }
        const float inv = sinks ? softmax_scores_sink_ref(s.data(), n, sinks[h]) : softmax_scores_ref(s.data(), n);
        std::fill(o.begin(), o.end(), 0.0f);
        for (int j = 0; j < n; ++j) {
          const int key = lo + j;
          const size_t base = (size_t)seg.block_table[key / kPageTokens] * page_elems + kv.offset(layer, 1, kvh, key % kPageTokens);
          for (int d = 0; d < D; ++d) o[d] = std::fmaf(s[j], page_elem_at(pages, kv.dtype, base + d), o[d]);
        }
        float* oh = out + (row * n_heads + h) * D;
        for (int d = 0; d < D; ++d) oh[d] = o[d] * inv;
      }
    }
  }
}

void geglu_ref(float* out, const float* gate, const float* up, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    const float g = gate[i];
    if (g <= -10.0f) {
      out[i] = 0.0f;
    } else if (g >= 10.0f) {
      out[i] = g * up[i];
    } else {
      const float x = f16_to_f32(f32_to_f16(g));
      const float gelu = 0.5f * x * (1.0f + std::tanh(0.79788456080286535587989211986876f * x * (1.0f + 0.044715f * x * x)));
      out[i] = f16_to_f32(f32_to_f16(gelu)) * up[i];
    }
  }
}

void scale_ref(float* out, const float* x, float s, size_t n) {
  for (size_t i = 0; i < n; ++i) out[i] = x[i] * s;
}

}  // namespace kvt
