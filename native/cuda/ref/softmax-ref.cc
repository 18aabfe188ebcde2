#include <cmath>

#include "ref.h"

namespace kvt_ref {

// x[rows,n] ← softmax over each row
void softmax(float* x, int rows, int n) {
  for (int r = 0; r < rows; ++r) {
    float* row = x + (size_t)r * n;
    float mx = -INFINITY;
    for (int j = 0; j < n; ++j) mx = row[j] > mx ? row[j] : mx;
    double s = 0;
    for (int j = 0; j < n; ++j) s += std::exp((double)row[j] - mx);
    for (int j = 0; j < n; ++j) row[j] = (float)(std::exp((double)row[j] - mx) / s);
  }
}

}  // namespace kvt_ref
