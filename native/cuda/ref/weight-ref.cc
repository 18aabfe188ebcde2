// Element access of host weights in their GGUF layouts.
#include <stdexcept>

#include "half-ref.h"
#include "ref.h"

namespace kvt_ref {

size_t weight_bytes(int type, int rows, int cols) {
  const size_t n = (size_t)rows * cols;
  switch (type) {
    case KVT_F32: return n * 4;
    case KVT_F16:
    case KVT_BF16: return n * 2;
    case KVT_Q8_0: return n / 32 * sizeof(kvt_block_q8_0);
    default: throw std::invalid_argument("unsupported weight type");
  }
}

float HostWeight::at(int n, int k) const {
  const size_t i = (size_t)n * cols + k;
  switch (type) {
    case KVT_F32: return reinterpret_cast<const float*>(raw.data())[i];
    case KVT_F16: return half_to_float(reinterpret_cast<const uint16_t*>(raw.data())[i]);
    case KVT_BF16: return bf16_to_float(reinterpret_cast<const uint16_t*>(raw.data())[i]);
    default: {
      const kvt_block_q8_0* b = reinterpret_cast<const kvt_block_q8_0*>(raw.data()) + i / 32;
      return half_to_float(b->d_bits) * (float)b->qs[i % 32];
    }
  }
}

size_t page_offset(int n_kv_heads, int head_dim, int layer, int kv, int kv_head, int pos_in_page) {
  return ((((size_t)layer * 2 + kv) * n_kv_heads + kv_head) * KVT_PAGE_TOKENS + pos_in_page) *
         (size_t)head_dim;
}

}  // namespace kvt_ref
