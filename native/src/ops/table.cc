// The kernel table of one ISA (this file is compiled once per ISA library).
#include "../kernels.h"

namespace kvt {
namespace KVT_ISA_NS {
void matmul(float*, const float*, const PackedWeight&, int, ThreadPool&);
void rmsnorm(float*, const float*, const float*, int, int, float, ThreadPool&);
void softmax(float*, int, int, ThreadPool&);
void swiglu(float*, const float*, const float*, size_t, ThreadPool&);
void add(float*, const float*, const float*, size_t, ThreadPool&);
void attention(float*, const float*, const uint8_t*, const KvLayout&, int, int, float, const AttnSegment*, int,
               ThreadPool&);
}  // namespace KVT_ISA_NS

const Kernels* KVT_ISA_TABLE() {
  static const Kernels table = {
      KVT_ISA_LABEL,          KVT_ISA_NS::matmul, KVT_ISA_NS::rmsnorm,   KVT_ISA_NS::softmax,
      KVT_ISA_NS::swiglu,     KVT_ISA_NS::add,    KVT_ISA_NS::attention,
  };
  return &table;
}

}  // namespace kvt
