// MLA absorbed attention, per ISA (see mla-attention.h for shapes and the
// per-(row, head) operation order, which this file keeps exactly: the q·k
// dot is 16 fma lanes over d (lane d%16) reduced by reduce_sum = reduce16,
// the V accumulation one fma per element in j order).
// Work item: one query row × a range of heads. All heads share the one
// latent K row (MQA), so a 64-key tile is widened to f32 once per item and
// used by every head of the item:
//   pass 1  tile by tile: s[h][j] = (q_h · k_j) · scale
//   pass 2  per head: max, e = exp(s − max), Σe in lanes j%16
//   pass 3  tile by tile: o[h] += e[h][j] · k_j[0..v_dim)   (j ascending across tiles)
// A decode step (few rows) splits the heads of a row over several items, so
// every core works; which item computes a (row, head) never changes its bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../simd/v16.h"
#include "mla-attention.h"

namespace kvt {
namespace KVT_ISA_NS {
using namespace simd;

static void widen_latent(float* dst, const uint8_t* pages, const MlaLayout& kv, int page, int layer, int n) {
  const size_t base = (size_t)page * kv.page_elems() + kv.offset(layer, 0);
  const size_t cnt = (size_t)n * kv.width;
  if (kv.dtype == F32) {
    std::memcpy(dst, reinterpret_cast<const float*>(pages) + base, cnt * 4);
    return;
  }
  const uint16_t* src = reinterpret_cast<const uint16_t*>(pages) + base;
  size_t i = 0;
  for (; i + 16 <= cnt; i += 16) store(dst + i, load_f16(src + i));
  for (; i < cnt; ++i) dst[i] = f16_to_f32(src[i]);
}

namespace {
struct Item {
  const AttnSegment* seg;
  int i;       // query index within the segment
  int h0, h1;  // heads [h0, h1)
};
}  // namespace

void mla_attention(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                   int v_dim, float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  int rows = 0;
  for (int s = 0; s < n_segs; ++s) rows += segs[s].n_q;
  const int threads = pool.size();
  int per = n_heads;
  if (rows < threads * 2) per = std::max(1, (n_heads * rows + threads * 2 - 1) / (threads * 2));
  std::vector<Item> items;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; ++i)
      for (int h = 0; h < n_heads; h += per) items.push_back({&segs[s], i, h, std::min(n_heads, h + per)});
  const int W = kv.width;
  const int WC = (W + 15) / 16;
  const int VC = (v_dim + 15) / 16;
  parallel_for_dynamic(pool, items.size(), 1, [&](size_t b, size_t e) {
    // +16: chunk loads of the last row may run past W (load_n keeps the extra lanes at zero)
    std::vector<float> tile((size_t)kPageTokens * W + 16), s, o;
    for (size_t it = b; it < e; ++it) {
      const Item& item = items[it];
      const AttnSegment& seg = *item.seg;
      const size_t row = (size_t)seg.q_row0 + item.i;
      const int n_keys = seg.pos0 + item.i + 1;
      const int nh = item.h1 - item.h0;
      s.assign((size_t)nh * n_keys, 0.0f);
      o.assign((size_t)nh * VC * 16, 0.0f);
      for (int j0 = 0; j0 < n_keys; j0 += kPageTokens) {
        const int cnt = std::min(kPageTokens, n_keys - j0);
        widen_latent(tile.data(), pages, kv, seg.block_table[j0 / kPageTokens], layer, cnt);
        for (int hh = 0; hh < nh; ++hh) {
          const float* qh = q + (row * n_heads + item.h0 + hh) * W;
          float* sh = s.data() + (size_t)hh * n_keys + j0;
          for (int t = 0; t < cnt; ++t) {
            const float* k = tile.data() + (size_t)t * W;
            V16 acc = zero();
            for (int c = 0; c < WC; ++c) {
              const int rem = W - c * 16;
              acc = rem >= 16 ? fma(load(qh + c * 16), load(k + c * 16), acc) : fma(load_n(qh + c * 16, rem), load_n(k + c * 16, rem), acc);
            }
            sh[t] = reduce_sum(acc) * scale;
          }
        }
      }
      std::vector<float> inv(nh);
      for (int hh = 0; hh < nh; ++hh) {
        float* sh = s.data() + (size_t)hh * n_keys;
        float m = sh[0];
        for (int j = 1; j < n_keys; ++j) m = sh[j] > m ? sh[j] : m;
        float lanes[16] = {0};
        for (int j = 0; j < n_keys; ++j) {
          sh[j] = exp_kvt(sh[j] - m);
          lanes[j % 16] += sh[j];
        }
        inv[hh] = 1.0f / reduce16(lanes);
      }
      for (int j0 = 0; j0 < n_keys; j0 += kPageTokens) {
        const int cnt = std::min(kPageTokens, n_keys - j0);
        widen_latent(tile.data(), pages, kv, seg.block_table[j0 / kPageTokens], layer, cnt);
        for (int hh = 0; hh < nh; ++hh) {
          const float* sh = s.data() + (size_t)hh * n_keys + j0;
          float* oh = o.data() + (size_t)hh * VC * 16;
          for (int c = 0; c < VC; ++c) {
            V16 acc = load(oh + c * 16);
            for (int t = 0; t < cnt; ++t) acc = fma(set1(sh[t]), load(tile.data() + (size_t)t * W + c * 16), acc);
            store(oh + c * 16, acc);
          }
        }
      }
      for (int hh = 0; hh < nh; ++hh) {
        float* dst = out + (row * n_heads + item.h0 + hh) * v_dim;
        const float* oh = o.data() + (size_t)hh * VC * 16;
        for (int d = 0; d < v_dim; ++d) dst[d] = oh[d] * inv[hh];
      }
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
