#include <cmath>

#include "ref.h"

namespace kvt_ref {

// In place on x[rows,heads,hd]; pair i < rot/2 of row r rotates by
// positions[r] * base^(-2i/rot) — the angle in double, cos/sin rounded to f32,
// the rotation in f32 without contraction (as the kernel).
void rope(float* x, const int32_t* positions, int rows, int heads, int hd, int rot, float base, int mode) {
  for (int r = 0; r < rows; ++r)
    for (int head = 0; head < heads; ++head) {
      float* row = x + ((size_t)r * heads + head) * hd;
      for (int i = 0; i < rot / 2; ++i) {
        const double theta = (double)positions[r] * std::pow((double)base, -2.0 * i / rot);
        const float c = (float)std::cos(theta), s = (float)std::sin(theta);
        const int i0 = mode == KVT_ROPE_NEOX ? i : 2 * i;
        const int i1 = mode == KVT_ROPE_NEOX ? i + rot / 2 : 2 * i + 1;
        const float x0 = row[i0], x1 = row[i1];
        const float a = x0 * c, b = x1 * s, e = x0 * s, f = x1 * c;
        row[i0] = a - b;
        row[i1] = e + f;
      }
    }
}

}  // namespace kvt_ref
