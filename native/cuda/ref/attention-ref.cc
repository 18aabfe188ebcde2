#include <cmath>
#include <vector>

#include "half-ref.h"
#include "ref.h"

namespace kvt_ref {

// out[T,n_head,hd] = softmax_j(q·k_j * scale, j ≤ pos0+t) · V  (two-pass, double)
void attention(float* out, const float* q, const HostPagedKv& kv, int layer, int t, int n_head,
               int pos0, float scale) {
  const int hd = kv.head_dim, group = n_head / kv.n_kv_heads;
  std::vector<double> s;
  for (int tt = 0; tt < t; ++tt)
    for (int h = 0; h < n_head; ++h) {
      const int kvh = h / group, pos = pos0 + tt;
      const float* qr = q + ((size_t)tt * n_head + h) * hd;
      s.assign(pos + 1, 0.0);
      double mx = -INFINITY;
      for (int j = 0; j <= pos; ++j) {
        const uint16_t* page = kv.pages + (size_t)kv.block_table[j / KVT_PAGE_TOKENS] * kv.page_elems;
        const uint16_t* kr = page + page_offset(kv.n_kv_heads, hd, layer, 0, kvh, j % KVT_PAGE_TOKENS);
        double d = 0;
        for (int c = 0; c < hd; ++c) d += (double)qr[c] * half_to_float(kr[c]);
        s[j] = d * scale;
        mx = s[j] > mx ? s[j] : mx;
      }
      double den = 0;
      for (int j = 0; j <= pos; ++j) den += (s[j] = std::exp(s[j] - mx));
      float* o = out + ((size_t)tt * n_head + h) * hd;
      for (int c = 0; c < hd; ++c) {
        double acc = 0;
        for (int j = 0; j <= pos; ++j) {
          const uint16_t* page = kv.pages + (size_t)kv.block_table[j / KVT_PAGE_TOKENS] * kv.page_elems;
          acc += s[j] * half_to_float(page[page_offset(kv.n_kv_heads, hd, layer, 1, kvh, j % KVT_PAGE_TOKENS) + c]);
        }
        o[c] = (float)(acc / den);
      }
    }
}

}  // namespace kvt_ref
