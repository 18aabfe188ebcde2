// Sliding-window attention (see window-attention.h for the math and order).
// Work item: one query row × one kv group. The window's K and V rows of that
// kv head are widened to f32 once per item and used by every head of the
// group; each (row, head) is then computed start to finish by one thread, in
// window_attention_ref's order, so results never depend on the batch or the
// thread count.
#include <algorithm>
#include <vector>

#include "window-attention.h"
#include "softmax-ref.h"

namespace kvt {

namespace {

// Widens keys [lo, hi) of (layer, which, kvh) into dst [hi − lo][D].
void widen_window(float* dst, const uint8_t* pages, const KvLayout& kv, const AttnSegment& sg, int layer, int which,
                  int kvh, int lo, int hi) {
  const int D = kv.head_dim;
  const size_t page_elems = kv.page_elems();
  for (int j = lo; j < hi; ++j) {
    const size_t base = (size_t)sg.block_table[j / kPageTokens] * page_elems + kv.offset(layer, which, kvh, j % kPageTokens);
    float* d = dst + (size_t)(j - lo) * D;
    if (kv.dtype == F32) {
      std::memcpy(d, pages + base * 4, (size_t)D * 4);
    } else {
      const uint16_t* src = reinterpret_cast<const uint16_t*>(pages) + base;
      for (int i = 0; i < D; ++i) d[i] = f16_to_f32(src[i]);
    }
  }
}

struct Item {
  int seg, row;
};

}  // namespace

void window_attention(float* out, const float* q, const uint8_t* pages, const KvLayout& kv, int layer, int n_heads,
                      float scale_, int window, const AttnSegment* segs, int n_segs, ThreadPool& pool,
                      const float* sinks) {
  std::vector<Item> items;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; ++i) items.push_back({s, i});
  const int D = kv.head_dim;
  const int group = n_heads / kv.kv_heads;
  const size_t n_items = items.size() * kv.kv_heads;
  parallel_for_dynamic(pool, n_items, 1, [&](size_t b, size_t e) {
    thread_local std::vector<float> kt, vt, s;
    std::vector<float> o(D);
    for (size_t it = b; it < e; ++it) {
      const Item& item = items[it / kv.kv_heads];
      const int g = (int)(it % kv.kv_heads);
      const AttnSegment& sg = segs[item.seg];
      const int pos = sg.pos0 + item.row;
      const int lo = window > 0 ? std::max(0, pos - window + 1) : 0;
      const int n = pos + 1 - lo;
      if (kt.size() < (size_t)n * D) {
        kt.resize((size_t)n * D);
        vt.resize((size_t)n * D);
      }
      widen_window(kt.data(), pages, kv, sg, layer, 0, g, lo, pos + 1);
      widen_window(vt.data(), pages, kv, sg, layer, 1, g, lo, pos + 1);
      if (s.size() < (size_t)n) s.resize(n);
      for (int hh = 0; hh < group; ++hh) {
        const int h = g * group + hh;
        const size_t row = (size_t)sg.q_row0 + item.row;
        const float* qh = q + (row * n_heads + h) * D;
        for (int j = 0; j < n; ++j) {
          const float* kr = kt.data() + (size_t)j * D;
          float lanes[16] = {0};
          for (int d = 0; d < D; ++d) lanes[d % 16] = std::fmaf(qh[d], kr[d], lanes[d % 16]);
          s[j] = reduce16(lanes) * scale_;
        }
        const float inv = sinks ? softmax_scores_sink_ref(s.data(), n, sinks[h]) : softmax_scores_ref(s.data(), n);
        std::fill(o.begin(), o.end(), 0.0f);
        for (int j = 0; j < n; ++j) {
          const float* vr = vt.data() + (size_t)j * D;
          for (int d = 0; d < D; ++d) o[d] = std::fmaf(s[j], vr[d], o[d]);
        }
        float* oh = out + (row * n_heads + h) * D;
        for (int d = 0; d < D; ++d) oh[d] = o[d] * inv;
      }
    }
  });
}

namespace {

float gelu_ggml(float x) {
  const float kA = 0.044715f;
  const float kSqrt2OverPi = 0.79788456080286535587989211986876f;
  return 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kA * x * x)));
}

// ggml's table: one f16 GELU value per f16 input.
const uint16_t* gelu_table() {
  static const std::vector<uint16_t> table = [] {
    std::vector<uint16_t> t(1 << 16);
    for (uint32_t i = 0; i < (1u << 16); ++i) t[i] = f32_to_f16(gelu_ggml(f16_to_f32((uint16_t)i)));
    return t;
  }();
  return table.data();
}

}  // namespace

static float geglu_one(float g, float u) {
  if (g <= -10.0f) return 0.0f;
  if (g >= 10.0f) return g * u;
  return f16_to_f32(gelu_table()[f32_to_f16(g)]) * u;
}

void geglu(float* out, const float* gate, const float* up, size_t n, ThreadPool& pool) {
  gelu_table();  // built once, before the workers read it
  parallel_for(pool, n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = geglu_one(gate[i], up[i]);
  }, 4096);
}

void scale(float* out, const float* x, float s, size_t n, ThreadPool& pool) {
  parallel_for(pool, n, [&](size_t b, size_t e) {
    for (size_t i = b; i < e; ++i) out[i] = x[i] * s;
  }, 4096);
}

}  // namespace kvt
