// MLA absorbed attention, per ISA (see mla-attention.h for shapes and the
// per-(row, head) operation order, which this file keeps exactly: the q·k
// dot is 16 fma lanes over d (lane d%16) reduced by reduce_sum = reduce16,
// the V accumulation one fma per element in j order).
// Work item: up to 4 consecutive query rows × a range of heads. All heads
// share the one latent K row (MQA), so a 64-key tile is widened to f32 once
// per item and used by every row and head of the item; in pass 1 a block of
// 4 rows × 4 keys shares each loaded chunk (16 independent fma chains):
//   pass 1  tile by tile: s[h][j] = (q_h · k_j) · scale
//   pass 2  per head: max, e = exp(s − max), Σe in lanes j%16
//   pass 3  tile by tile: o[h] += e[h][j] · k_j[0..v_dim)   (j ascending across tiles)
// A decode step (few rows) splits the heads of a row over several items, so
// every core works; which item computes a (row, head) never changes its bits.
#include <algorithm>
#include <cstring>
#include <vector>

#include "../simd/v16.h"
#include "softmax-scores.h"
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
constexpr int kRows = 4;  // query rows per item in prefill: they share every loaded K chunk
struct Item {
  const AttnSegment* seg;
  int i0, nr;  // query indices [i0, i0 + nr) within the segment
  int h0, h1;  // heads [h0, h1)
};

// Masked chunk c of a W-wide row (lanes past W are zero).
inline V16 chunk(const float* p, int c, int W) {
  const int rem = W - c * 16;
  return rem >= 16 ? load(p + c * 16) : load_n(p + c * 16, rem);
}
}  // namespace

void mla_attention(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                   int v_dim, float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  int rows = 0;
  for (int s = 0; s < n_segs; ++s) rows += segs[s].n_q;
  const int threads = pool.size();
  // few rows (decode): one row per item and the heads split so every thread gets work
  const bool few = rows < threads * 2 * kRows;
  const int rows_per = few ? 1 : kRows;
  int per = n_heads;
  if (few && rows < threads * 2) per = std::max(1, (n_heads * rows + threads * 2 - 1) / (threads * 2));
  std::vector<Item> items;
  for (int s = 0; s < n_segs; ++s)
    for (int i = 0; i < segs[s].n_q; i += rows_per)
      for (int h = 0; h < n_heads; h += per) items.push_back({&segs[s], i, std::min(rows_per, segs[s].n_q - i), h, std::min(n_heads, h + per)});
  const int W = kv.width;
  const int WC = (W + 15) / 16;
  const int VC = (v_dim + 15) / 16;
  parallel_for_dynamic(pool, items.size(), 1, [&](size_t b, size_t e) {
    // +16: chunk loads of the last row may run past W (load_n keeps the extra lanes at zero)
    std::vector<float> tile((size_t)kPageTokens * W + 16), s, o;
    for (size_t it = b; it < e; ++it) {
      const Item& item = items[it];
      const AttnSegment& seg = *item.seg;
      const int nr = item.nr;
      const int nh = item.h1 - item.h0;
      const int max_keys = seg.pos0 + item.i0 + nr;  // keys of the item's last row
      // s[r][hh][j], row r attends keys [0, pos0 + i0 + r]
      const size_t s_stride = (size_t)max_keys;
      s.assign((size_t)nr * nh * s_stride, 0.0f);
      o.assign((size_t)nr * nh * VC * 16, 0.0f);
      auto qrow = [&](int r, int hh) { return q + (((size_t)seg.q_row0 + item.i0 + r) * n_heads + item.h0 + hh) * W; };
      auto srow = [&](int r, int hh) { return s.data() + ((size_t)r * nh + hh) * s_stride; };
      for (int j0 = 0; j0 < max_keys; j0 += kPageTokens) {
        const int cnt = std::min(kPageTokens, max_keys - j0);
        widen_latent(tile.data(), pages, kv, seg.block_table[j0 / kPageTokens], layer, cnt);
        for (int hh = 0; hh < nh; ++hh) {
          int t = 0;
          if (nr == kRows) {
            // 4 rows × 4 keys: 16 independent fma chains (c ascending per (row, key), as in the twin)
            for (; t + 4 <= cnt; t += 4) {
              const float* k = tile.data() + (size_t)t * W;
              V16 acc[kRows][4];
              for (int r = 0; r < kRows; ++r)
                for (int u = 0; u < 4; ++u) acc[r][u] = zero();
              for (int c = 0; c < WC; ++c) {
                const V16 k0 = chunk(k, c, W), k1 = chunk(k + W, c, W), k2 = chunk(k + 2 * W, c, W), k3 = chunk(k + 3 * W, c, W);
                for (int r = 0; r < kRows; ++r) {
                  const V16 qc = chunk(qrow(r, hh), c, W);
                  acc[r][0] = fma(qc, k0, acc[r][0]);
                  acc[r][1] = fma(qc, k1, acc[r][1]);
                  acc[r][2] = fma(qc, k2, acc[r][2]);
                  acc[r][3] = fma(qc, k3, acc[r][3]);
                }
              }
              for (int r = 0; r < kRows; ++r) {
                const int n_keys = seg.pos0 + item.i0 + r + 1;
                float* sr = srow(r, hh);
                for (int u = 0; u < 4; ++u)
                  if (j0 + t + u < n_keys) sr[j0 + t + u] = reduce_sum(acc[r][u]) * scale;
              }
            }
          }
          // the rest (keys past the blocked part, or an item of fewer rows): one (row, key) at a time
          for (int r = 0; r < nr; ++r) {
            const int n_keys = seg.pos0 + item.i0 + r + 1;
            const float* qh = qrow(r, hh);
            float* sr = srow(r, hh);
            for (int u = t; u < cnt && j0 + u < n_keys; ++u) {
              const float* k = tile.data() + (size_t)u * W;
              V16 acc = zero();
              for (int c = 0; c < WC; ++c) acc = fma(chunk(qh, c, W), chunk(k, c, W), acc);
              sr[j0 + u] = reduce_sum(acc) * scale;
            }
          }
        }
      }
      std::vector<float> inv((size_t)nr * nh);
      for (int r = 0; r < nr; ++r)
        for (int hh = 0; hh < nh; ++hh) {
          const int n_keys = seg.pos0 + item.i0 + r + 1;
          inv[(size_t)r * nh + hh] = softmax_scores(srow(r, hh), n_keys);
        }
      for (int j0 = 0; j0 < max_keys; j0 += kPageTokens) {
        const int cnt = std::min(kPageTokens, max_keys - j0);
        widen_latent(tile.data(), pages, kv, seg.block_table[j0 / kPageTokens], layer, cnt);
        for (int r = 0; r < nr; ++r) {
          const int n_keys = seg.pos0 + item.i0 + r + 1;
          const int cr = std::min(cnt, n_keys - j0);
          if (cr <= 0) continue;
          for (int hh = 0; hh < nh; ++hh) {
            const float* sh = srow(r, hh) + j0;
            float* oh = o.data() + ((size_t)r * nh + hh) * VC * 16;
            // up to 8 chunks of o in registers: independent chains, each over keys ascending
            for (int c0 = 0; c0 < VC; c0 += 8) {
              const int nc = std::min(8, VC - c0);
              V16 acc[8];
              for (int c = 0; c < nc; ++c) acc[c] = load(oh + (c0 + c) * 16);
              for (int u = 0; u < cr; ++u) {
                const V16 pr = set1(sh[u]);
                const float* k = tile.data() + (size_t)u * W + c0 * 16;
                for (int c = 0; c < nc; ++c) acc[c] = fma(pr, load(k + c * 16), acc[c]);
              }
              for (int c = 0; c < nc; ++c) store(oh + (c0 + c) * 16, acc[c]);
            }
          }
        }
      }
      for (int r = 0; r < nr; ++r)
        for (int hh = 0; hh < nh; ++hh) {
          float* dst = out + (((size_t)seg.q_row0 + item.i0 + r) * n_heads + item.h0 + hh) * v_dim;
          const float* oh = o.data() + ((size_t)r * nh + hh) * VC * 16;
          const float iv = inv[(size_t)r * nh + hh];
          for (int d = 0; d < v_dim; ++d) dst[d] = oh[d] * iv;
        }
    }
  });
}

}  // namespace KVT_ISA_NS
}  // namespace kvt
