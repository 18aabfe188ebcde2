// MLA: the latent KV write (ISA-independent, tiny) and the run-time choice
// of the per-ISA attention kernel (ops/mla-attention.cc, compiled once per ISA
// library), following the active kernel table's ISA.
#include <cstring>

#include "../dispatch.h"
#include "mla-attention.h"

namespace kvt {
namespace isa_scalar {
void mla_attention(float*, const float*, const uint8_t*, const MlaLayout&, int, int, int, float, const AttnSegment*, int, ThreadPool&);
}
namespace isa_avx2 {
void mla_attention(float*, const float*, const uint8_t*, const MlaLayout&, int, int, int, float, const AttnSegment*, int, ThreadPool&);
}
namespace isa_avx512 {
void mla_attention(float*, const float*, const uint8_t*, const MlaLayout&, int, int, int, float, const AttnSegment*, int, ThreadPool&);
}

void mla_attention(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                   int v_dim, float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool) {
  const char* isa = active_kernels().isa;
  auto fn = std::strcmp(isa, "avx512") == 0 ? isa_avx512::mla_attention
            : std::strcmp(isa, "avx2") == 0 ? isa_avx2::mla_attention
                                            : isa_scalar::mla_attention;
  fn(out, q, pages, kv, layer, n_heads, v_dim, scale, segs, n_segs, pool);
}

void mla_kv_write(uint8_t* pages, const MlaLayout& kv, int layer, const int32_t* block_table, int pos0, int n,
                  const float* latent, ThreadPool& pool) {
  parallel_for(pool, (size_t)n, [&](size_t b, size_t e) {
    for (size_t t = b; t < e; ++t) {
      int pos = pos0 + (int)t;
      size_t idx = (size_t)block_table[pos / kPageTokens] * kv.page_elems() + kv.offset(layer, pos % kPageTokens);
      const float* src = latent + t * kv.width;
      if (kv.dtype == F32) std::memcpy(pages + idx * 4, src, (size_t)kv.width * 4);
      else {
        uint16_t* dst = reinterpret_cast<uint16_t*>(pages) + idx;
        for (int d = 0; d < kv.width; ++d) dst[d] = f32_to_f16(src[d]);
      }
    }
  }, 16);
}

}  // namespace kvt
