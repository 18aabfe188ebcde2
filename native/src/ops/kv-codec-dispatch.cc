// Run-time choice of the per-ISA KV block decoder (ops/kv-codec.cc, compiled
// once per ISA library), following the active kernel table's ISA.
#include <cstring>

#include "../dispatch.h"
#include "kv-codec.h"

namespace kvt {
namespace isa_scalar { void kv_decode(uint8_t*, const uint8_t*, const KvCodecShape&); }
namespace isa_avx2 { void kv_decode(uint8_t*, const uint8_t*, const KvCodecShape&); }
namespace isa_avx512 { void kv_decode(uint8_t*, const uint8_t*, const KvCodecShape&); }

void kv_decode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s) {
  const char* isa = active_kernels().isa;
  auto fn = std::strcmp(isa, "avx512") == 0 ? isa_avx512::kv_decode
            : std::strcmp(isa, "avx2") == 0 ? isa_avx2::kv_decode
                                            : isa_scalar::kv_decode;
  fn(dst, src, s);
}

}  // namespace kvt
