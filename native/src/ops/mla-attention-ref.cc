// Reference twins of ops/mla-attention.cc: one token / one (row, head) at a
// time, plain loops, single thread, every key read straight from its page.
#include <cstring>
#include <vector>

#include "mla-attention.h"
#include "softmax-ref.h"

namespace kvt {

static float latent_at(const uint8_t* pages, const MlaLayout& kv, size_t idx) { return page_elem_at(pages, kv.dtype, idx); }

void mla_kv_write_ref(uint8_t* pages, const MlaLayout& kv, int layer, const int32_t* block_table, int pos0, int n,
                      const float* latent) {
  for (int t = 0; t < n; ++t) {
    int pos = pos0 + t;
    size_t base = (size_t)block_table[pos / kPageTokens] * kv.page_elems() + kv.offset(layer, pos % kPageTokens);
    for (int d = 0; d < kv.width; ++d) {
      float x = latent[(size_t)t * kv.width + d];
      if (kv.dtype == F32) std::memcpy(pages + (base + d) * 4, &x, 4);
      else {
        uint16_t h = f32_to_f16(x);
        std::memcpy(pages + (base + d) * 2, &h, 2);
      }
    }
  }
}

void mla_attention_ref(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                       int v_dim, float scale, const AttnSegment* segs, int n_segs) {
  const int W = kv.width;
  std::vector<float> s, o(v_dim);
  for (int sg = 0; sg < n_segs; ++sg) {
    const AttnSegment& seg = segs[sg];
    for (int i = 0; i < seg.n_q; ++i) {
      size_t row = (size_t)seg.q_row0 + i;
      int n_keys = seg.pos0 + i + 1;
      for (int h = 0; h < n_heads; ++h) {
        const float* qh = q + (row * n_heads + h) * W;
        s.assign(n_keys, 0.0f);
        for (int j = 0; j < n_keys; ++j) {
          size_t base = (size_t)seg.block_table[j / kPageTokens] * kv.page_elems() + kv.offset(layer, j % kPageTokens);
          float lanes[16] = {0};
          for (int d = 0; d < W; ++d) lanes[d % 16] = std::fmaf(qh[d], latent_at(pages, kv, base + d), lanes[d % 16]);
          s[j] = reduce16(lanes) * scale;
        }
        float inv = softmax_scores_ref(s.data(), n_keys);
        std::fill(o.begin(), o.end(), 0.0f);
        for (int j = 0; j < n_keys; ++j) {
          size_t base = (size_t)seg.block_table[j / kPageTokens] * kv.page_elems() + kv.offset(layer, j % kPageTokens);
          for (int d = 0; d < v_dim; ++d) o[d] = std::fmaf(s[j], latent_at(pages, kv, base + d), o[d]);
        }
        float* oh = out + (row * n_heads + h) * v_dim;
        for (int d = 0; d < v_dim; ++d) oh[d] = o[d] * inv;
      }
    }
  }
}

}  // namespace kvt
