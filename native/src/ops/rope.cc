// RoPE, in place (ISA-independent: O(rows·heads·dim), angles dominate).
//   x [rows][n_heads][head_dim], positions [rows]
//   pair p < rot/2 rotates by pos·base^(−2p/rot):
//     normal (GPT-J, llama GGUF): (x[2p], x[2p+1]);  neox: (x[p], x[p+rot/2])
//   dims >= rot_dims are left as they are (partial rotary).
// cos/sin are computed once per row in double and shared by the row's heads.
#include <cmath>
#include <vector>

#include "../kernels.h"

namespace kvt {

void rope_angles(float* cs, float* sn, int pos, int rot_dims, float freq_base) {
  for (int p = 0; p < rot_dims / 2; ++p) {
    double theta = (double)pos * std::pow((double)freq_base, -2.0 * p / rot_dims);
    cs[p] = (float)std::cos(theta);
    sn[p] = (float)std::sin(theta);
  }
}

void rope_head(float* x, const float* cs, const float* sn, int rot_dims, int mode) {
  const int half = rot_dims / 2;
  for (int p = 0; p < half; ++p) {
    int i0 = mode == 2 ? p : 2 * p;
    int i1 = mode == 2 ? p + half : 2 * p + 1;
    float a = x[i0], b = x[i1];
    x[i0] = a * cs[p] - b * sn[p];
    x[i1] = a * sn[p] + b * cs[p];
  }
}

void rope(float* x, const int32_t* positions, int rows, int n_heads, int head_dim, int rot_dims, int mode,
          float freq_base, ThreadPool& pool) {
  parallel_for(pool, (size_t)rows, [&](size_t b, size_t e) {
    std::vector<float> cs(rot_dims / 2 + 1), sn(rot_dims / 2 + 1);
    for (size_t r = b; r < e; ++r) {
      rope_angles(cs.data(), sn.data(), positions[r], rot_dims, freq_base);
      for (int h = 0; h < n_heads; ++h)
        rope_head(x + (r * n_heads + h) * head_dim, cs.data(), sn.data(), rot_dims, mode);
    }
  }, 8);
}

}  // namespace kvt
