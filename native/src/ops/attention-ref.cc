// Reference twin of ops/attention.cc: the same math, one (row, head) at a
// time, plain loops, single thread. Shapes as in attention.cc.
#include <vector>

#include "../kernels.h"
#include "softmax-ref.h"

namespace kvt {

static float kv_at(const uint8_t* pages, const KvLayout& kv, size_t idx) { return page_elem_at(pages, kv.dtype, idx); }

void attention_ref(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                   float scale, const AttnSegment* segs, int n_segs) {
  const int D = kv.head_dim;
  const int group = n_heads / kv.kv_heads;
  const size_t page_elems = kv.page_elems();
  std::vector<float> s;
  std::vector<float> o(D);
  for (int sg = 0; sg < n_segs; ++sg) {
    const AttnSegment& seg = segs[sg];
    for (int i = 0; i < seg.n_q; ++i) {
      size_t row = (size_t)seg.q_row0 + i;
      int n_keys = seg.pos0 + i + 1;
      for (int h = 0; h < n_heads; ++h) {
        const float* qh = q + (row * n_heads + h) * D;
        int kvh = h / group;
        s.assign(n_keys, 0.0f);
        for (int j = 0; j < n_keys; ++j) {
          size_t base = (size_t)seg.block_table[j / kPageTokens] * page_elems + kv.offset(layer, 0, kvh, j % kPageTokens);
          float lanes[16] = {0};
          for (int d = 0; d < D; ++d) lanes[d % 16] = std::fmaf(qh[d], kv_at(pages, kv, base + d), lanes[d % 16]);
          s[j] = reduce16(lanes) * scale;
        }
        float inv = softmax_scores_ref(s.data(), n_keys);
        std::fill(o.begin(), o.end(), 0.0f);
        for (int j = 0; j < n_keys; ++j) {
          size_t base = (size_t)seg.block_table[j / kPageTokens] * page_elems + kv.offset(layer, 1, kvh, j % kPageTokens);
          for (int d = 0; d < D; ++d) o[d] = std::fmaf(s[j], kv_at(pages, kv, base + d), o[d]);
        }
        float* oh = out + (row * n_heads + h) * D;
        for (int d = 0; d < D; ++d) oh[d] = o[d] * inv;
      }
    }
  }
}

}  // namespace kvt
