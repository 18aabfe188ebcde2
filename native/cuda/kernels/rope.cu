// Rotary position embedding, in place on query or key rows.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// x[rows,heads,hd] rotated in place; row r is at position positions[r].
//   Pair i (0 ≤ i < rot/2) rotates by angle pos * base^(-2i/rot) (double, then f32 cos/sin):
//     NORMAL: (x[2i], x[2i+1]);  NEOX: (x[i], x[i+rot/2]);  dims ≥ rot untouched.
//   grid (rows, heads), block rot/2.
__global__ void rope_kernel(float* x, const int32_t* __restrict__ positions, int heads, int hd,
                            int rot, float base, int mode) {
  const int r = blockIdx.x, head = blockIdx.y, i = threadIdx.x;
  float* row = x + ((size_t)r * heads + head) * hd;
  // Angle in double: at position 32k an f32 angle is off by ~4e-3 rad.
  const double theta = (double)positions[r] * pow((double)base, -2.0 * i / rot);
  const float c = (float)cos(theta), s = (float)sin(theta);
  const int i0 = mode == KVT_ROPE_NEOX ? i : 2 * i;
  const int i1 = mode == KVT_ROPE_NEOX ? i + rot / 2 : 2 * i + 1;
  const float x0 = row[i0], x1 = row[i1];
  row[i0] = __fsub_rn(__fmul_rn(x0, c), __fmul_rn(x1, s));
  row[i1] = __fadd_rn(__fmul_rn(x0, s), __fmul_rn(x1, c));
}

}  // namespace

cudaError_t launch_rope(float* x, const int32_t* positions, int rows, int heads, int hd, int rot,
                        float base, int mode, cudaStream_t stream) {
  if (rows <= 0 || heads <= 0 || rot <= 0 || rot % 2 != 0 || rot > hd || rot > 2048)
    return cudaErrorInvalidValue;
  rope_kernel<<<dim3(rows, heads), rot / 2, 0, stream>>>(x, positions, heads, hd, rot, base, mode);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
