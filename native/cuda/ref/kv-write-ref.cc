#include "half-ref.h"
#include "ref.h"

namespace kvt_ref {

// k,v [T,n_kv,hd] → f16 pages at positions pos0..pos0+T-1 of layer `layer`
void kv_write(const HostPagedKv& kv, const float* k, const float* v, int layer, int t, int pos0) {
  for (int tt = 0; tt < t; ++tt) {
    const int pos = pos0 + tt;
    uint16_t* page = kv.pages + (size_t)kv.block_table[pos / KVT_PAGE_TOKENS] * kv.page_elems;
    for (int h = 0; h < kv.n_kv_heads; ++h)
      for (int j = 0; j < kv.head_dim; ++j) {
        const size_t src = ((size_t)tt * kv.n_kv_heads + h) * kv.head_dim + j;
        const int p = pos % KVT_PAGE_TOKENS;
        page[page_offset(kv.n_kv_heads, kv.head_dim, layer, 0, h, p) + j] = float_to_half(k[src]);
        page[page_offset(kv.n_kv_heads, kv.head_dim, layer, 1, h, p) + j] = float_to_half(v[src]);
      }
  }
}

}  // namespace kvt_ref
