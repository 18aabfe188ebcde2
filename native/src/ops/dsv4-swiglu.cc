// dsv4_swiglu_clamp (see dsv4-swiglu.h): the values split over the pool's
// threads in chunks, each computed as the _ref twin computes it.
#include "dsv4-swiglu.h"

namespace kvt {

void dsv4_swiglu_clamp(float* out, const float* g, const float* u, size_t n, double limit, ThreadPool& pool) {
  parallel_for(pool, n, [&](size_t b, size_t e) { dsv4_swiglu_clamp_ref(out + b, g + b, u + b, e - b, limit); }, 4096);
}

}  // namespace kvt
