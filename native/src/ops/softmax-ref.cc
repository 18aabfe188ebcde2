// Reference twin of ops/softmax.cc.  x[rows][cols] in place.
#include "../kernels.h"
#include "softmax-ref.h"

namespace kvt {

void softmax_ref(float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* xr = x + (size_t)r * cols;
    float m = -3.402823466e38f;
    for (int i = 0; i < cols; ++i) m = xr[i] > m ? xr[i] : m;
    float inv = exp_shift_inv_sum_ref(xr, cols, m);
    for (int i = 0; i < cols; ++i) xr[i] *= inv;
  }
}

}  // namespace kvt
