// Writes new K/V rows into KV pages (ISA-independent, tiny).
//   k, v [n][kv_heads][head_dim] f32 → page[table[pos/64]][layer][K|V][head][pos%64][:]
//   for pos = pos0 .. pos0+n−1; f16 pages round to nearest even.
#include "../kernels.h"

namespace kvt {

static void write_row(uint8_t* pages, const KvLayout& kv, size_t idx, const float* src) {
  if (kv.dtype == F32) {
    std::memcpy(pages + idx * 4, src, (size_t)kv.head_dim * 4);
    return;
  }
  uint16_t* dst = reinterpret_cast<uint16_t*>(pages) + idx;
  for (int d = 0; d < kv.head_dim; ++d) dst[d] = f32_to_f16(src[d]);
}

void kv_write(uint8_t* pages, const KvLayout& kv, int layer, const int32_t* block_table, int n_blocks, int pos0,
              int n, const float* k, const float* v, ThreadPool& pool) {
  (void)n_blocks;  // coverage is checked by the binding
  const size_t row = (size_t)kv.kv_heads * kv.head_dim;
  parallel_for(pool, (size_t)n, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      int pos = pos0 + (int)t;
      size_t page = (size_t)block_table[pos / kPageTokens] * kv.page_elems();
      for (int h = 0; h < kv.kv_heads; ++h) {
        write_row(pages, kv, page + kv.offset(layer, 0, h, pos % kPageTokens), k + t * row + (size_t)h * kv.head_dim);
        write_row(pages, kv, page + kv.offset(layer, 1, h, pos % kPageTokens), v + t * row + (size_t)h * kv.head_dim);
      }
    }
  }, 16);
}

}  // namespace kvt
