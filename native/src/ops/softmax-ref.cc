// Reference twin of ops/softmax.cc.  x[rows][cols] in place.
#include "../kernels.h"

namespace kvt {

void softmax_ref(float* x, int rows, int cols) {
  for (int r = 0; r < rows; ++r) {
    float* xr = x + (size_t)r * cols;
    float m = -3.402823466e38f;
    for (int i = 0; i < cols; ++i) m = xr[i] > m ? xr[i] : m;
    float lanes[16] = {0};
    for (int i = 0; i < cols; ++i) {
      xr[i] = exp_kvt(xr[i] - m);
      lanes[i % 16] += xr[i];
    }
    float inv = 1.0f / reduce16(lanes);
    for (int i = 0; i < cols; ++i) xr[i] *= inv;
  }
}

}  // namespace kvt
