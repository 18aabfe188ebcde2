// Rotary position embedding, in place on the query and key rows.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

// q[T,n_head,hd], k[T,n_kv,hd] rotated in place; token t at position pos0+t.
//   Pair i (0 ≤ i < hd/2) rotates by angle pos * base^(-2i/hd):
//     NORMAL: (x[2i], x[2i+1]);  NEOX: (x[i], x[i+hd/2]).
//   grid (T, n_head + n_kv), block hd/2.
__global__ void rope_kernel(float* q, float* k, int n_head, int n_kv, int hd, int pos0,
                            float base, int mode) {
  const int t = blockIdx.x, head = blockIdx.y, i = threadIdx.x;
  float* row = head < n_head ? q + ((size_t)t * n_head + head) * hd
                             : k + ((size_t)t * n_kv + (head - n_head)) * hd;
  const float inv_freq = powf(base, -(float)(2 * i) / (float)hd);
  const float angle = (float)(pos0 + t) * inv_freq;
  float s, c;
  sincosf(angle, &s, &c);
  const int i0 = mode == KVT_ROPE_NEOX ? i : 2 * i;
  const int i1 = mode == KVT_ROPE_NEOX ? i + hd / 2 : 2 * i + 1;
  const float x0 = row[i0], x1 = row[i1];
  row[i0] = x0 * c - x1 * s;
  row[i1] = x0 * s + x1 * c;
}

}  // namespace

cudaError_t launch_rope(float* q, float* k, int t, int n_head, int n_kv, int hd, int pos0,
                        float base, int mode, cudaStream_t stream) {
  if (t <= 0 || hd % 2 != 0 || hd > 2048) return cudaErrorInvalidValue;
  rope_kernel<<<dim3(t, n_head + n_kv), hd / 2, 0, stream>>>(q, k, n_head, n_kv, hd, pos0, base,
                                                             mode);
  return cudaGetLastError();
}

}  // namespace kvt_cuda
