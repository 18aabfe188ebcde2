#include "ref.h"

namespace kvt_ref {

// out[rows] = first index of the row maximum
void argmax(int32_t* out, const float* x, int rows, int n) {
  for (int r = 0; r < rows; ++r) {
    const float* row = x + (size_t)r * n;
    int best = 0;
    for (int j = 1; j < n; ++j)
      if (row[j] > row[best]) best = j;
    out[r] = best;
  }
}

}  // namespace kvt_ref
