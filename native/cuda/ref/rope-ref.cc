#include <cmath>

#include "ref.h"

namespace kvt_ref {

// In place on q[T,n_head,hd], k[T,n_kv,hd]; pair i of token t rotates by
// (pos0+t) * base^(-2i/hd) — the same f32 frequency as the kernel, then the
// rotation in double.
void rope(float* q, float* k, int t, int n_head, int n_kv, int hd, int pos0, float base, int mode) {
  for (int tt = 0; tt < t; ++tt)
    for (int head = 0; head < n_head + n_kv; ++head) {
      float* row = head < n_head ? q + ((size_t)tt * n_head + head) * hd
                                 : k + ((size_t)tt * n_kv + (head - n_head)) * hd;
      for (int i = 0; i < hd / 2; ++i) {
        const float inv_freq = std::pow(base, -(float)(2 * i) / (float)hd);
        const double angle = (double)((float)(pos0 + tt) * inv_freq);
        const double c = std::cos(angle), s = std::sin(angle);
        const int i0 = mode == KVT_ROPE_NEOX ? i : 2 * i;
        const int i1 = mode == KVT_ROPE_NEOX ? i + hd / 2 : 2 * i + 1;
        const double x0 = row[i0], x1 = row[i1];
        row[i0] = (float)(x0 * c - x1 * s);
        row[i1] = (float)(x0 * s + x1 * c);
      }
    }
}

}  // namespace kvt_ref
