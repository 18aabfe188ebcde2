// Reference twin of ops/kv-write.cc: element by element, single thread.
#include "../kernels.h"

namespace kvt {

void kv_write_ref(uint8_t* pages, const KvLayout& kv, int layer, const int32_t* block_table, int n_blocks, int pos0,
                  int n, const float* k, const float* v) {
  (void)n_blocks;
  for (int t = 0; t < n; ++t) {
    int pos = pos0 + t;
    size_t page = (size_t)block_table[pos / kPageTokens] * kv.page_elems();
    for (int h = 0; h < kv.kv_heads; ++h)
      for (int d = 0; d < kv.head_dim; ++d)
        for (int which = 0; which < 2; ++which) {
          float x = (which == 0 ? k : v)[((size_t)t * kv.kv_heads + h) * kv.head_dim + d];
          size_t idx = page + kv.offset(layer, which, h, pos % kPageTokens) + d;
          if (kv.dtype == F32) std::memcpy(pages + idx * 4, &x, 4);
          else {
            uint16_t hx = f32_to_f16(x);
            std::memcpy(pages + idx * 2, &hx, 2);
          }
        }
  }
}

}  // namespace kvt
