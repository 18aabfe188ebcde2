// CUDA-core matrix-vector product (M ≤ 8): the linear layer of F32 weights
// (which have no tensor-core path), and a plain f32 twin for the others.
// Reads each weight byte once with 16-byte loads and keeps all M activation
// rows in registers; each element's sum order is fixed (lane-strided k, then
// a butterfly), so it does not depend on M either.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

constexpr int kWarps = 4;  // rows of W per block (one warp per output feature)

// Eight consecutive weights of row n starting at k, as f32.
template <int WTYPE>
__device__ inline void load8(float (&wv)[8], const DeviceWeight& w, int n, int k) {
  const size_t base = (size_t)n * w.cols + k;
  if constexpr (WTYPE == KVT_F16) {
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const __half*>(w.data) + base);
    const __half2* h = reinterpret_cast<const __half2*>(&raw);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 f = __half22float2(h[j]);
      wv[2 * j] = f.x;
      wv[2 * j + 1] = f.y;
    }
  } else if constexpr (WTYPE == KVT_BF16) {
    const uint4 raw = *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) + base);
    const uint16_t* b = reinterpret_cast<const uint16_t*>(&raw);
#pragma unroll
    for (int j = 0; j < 8; ++j) wv[j] = bf16_bits_to_float(b[j]);
  } else if constexpr (WTYPE == KVT_F32) {
    const float4* p = reinterpret_cast<const float4*>(static_cast<const float*>(w.data) + base);
    const float4 a = p[0], b = p[1];
    wv[0] = a.x; wv[1] = a.y; wv[2] = a.z; wv[3] = a.w;
    wv[4] = b.x; wv[5] = b.y; wv[6] = b.z; wv[7] = b.w;
  } else {  // Q8_0 planes
    const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(w.data) + base);
    const int8_t* q = reinterpret_cast<const int8_t*>(&raw);
    const float d = __half2float(w.scales[(size_t)n * (w.cols / kQ8Group) + k / kQ8Group]);
#pragma unroll
    for (int j = 0; j < 8; ++j) wv[j] = d * (float)q[j];
  }
}

// acc[m] += Σ_j wv[j] * x[m][k + j] for the eight weights at k.
template <int MR>
__device__ inline void accumulate_rows(float (&acc)[MR], const float (&wv)[8],
                                       const float* __restrict__ x, int K, int k) {
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const float4* xp = reinterpret_cast<const float4*>(x + (size_t)m * K + k);
    const float4 a = __ldg(xp), b = __ldg(xp + 1);
    acc[m] += wv[0] * a.x + wv[1] * a.y + wv[2] * a.z + wv[3] * a.w + wv[4] * b.x +
              wv[5] * b.y + wv[6] * b.z + wv[7] * b.w;
  }
}

// Y[MR,N] (=|+=) X[MR,K] · W[N,K]^T
//   x: f32 [MR][K]; w: [N][K]; y: f32 [MR][N]; grid ceil(N/4), block 128; K % 8 == 0.
template <int WTYPE, int MR>
__global__ void __launch_bounds__(kWarps * 32)
    gemv_kernel(float* __restrict__ y, const float* __restrict__ x, DeviceWeight w,
                int accumulate) {
  const int lane = threadIdx.x & 31;
  const int n = blockIdx.x * kWarps + (threadIdx.x >> 5);
  if (n >= w.rows) return;
  const int K = w.cols;
  float acc[MR];
#pragma unroll
  for (int m = 0; m < MR; ++m) acc[m] = 0.f;
  // Four 16-byte weight loads in flight per lane before any math: a decode
  // GEMV is bound by bytes in flight, not by FMAs.
  constexpr int kStep = 32 * 8;
  int k = lane * 8;
  for (; k + 3 * kStep < K; k += 4 * kStep) {
    float wv[4][8];
#pragma unroll
    for (int u = 0; u < 4; ++u) load8<WTYPE>(wv[u], w, n, k + u * kStep);
#pragma unroll
    for (int u = 0; u < 4; ++u) accumulate_rows<MR>(acc, wv[u], x, K, k + u * kStep);
  }
  for (; k < K; k += kStep) {
    float wv[8];
    load8<WTYPE>(wv, w, n, k);
    accumulate_rows<MR>(acc, wv, x, K, k);
  }
#pragma unroll
  for (int m = 0; m < MR; ++m) {
    const float s = warp_sum(acc[m]);
    if (lane == 0) {
      float* dst = y + (size_t)m * w.rows + n;
      *dst = accumulate ? *dst + s : s;
    }
  }
}

template <int WTYPE>
cudaError_t launch_typed(float* y, const float* x, const DeviceWeight& w, int m, int acc,
                         cudaStream_t s) {
  const dim3 grid((w.rows + kWarps - 1) / kWarps), block(kWarps * 32);
  switch (m) {
    case 1: gemv_kernel<WTYPE, 1><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 2: gemv_kernel<WTYPE, 2><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 3: gemv_kernel<WTYPE, 3><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 4: gemv_kernel<WTYPE, 4><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 5: gemv_kernel<WTYPE, 5><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 6: gemv_kernel<WTYPE, 6><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 7: gemv_kernel<WTYPE, 7><<<grid, block, 0, s>>>(y, x, w, acc); break;
    case 8: gemv_kernel<WTYPE, 8><<<grid, block, 0, s>>>(y, x, w, acc); break;
    default: return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace

cudaError_t launch_gemv(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                        cudaStream_t stream) {
  if (w.cols % 8 != 0 || m < 1 || m > kGemvMaxM) return cudaErrorInvalidValue;
  switch (w.type) {
    case KVT_F16: return launch_typed<KVT_F16>(y, x, w, m, accumulate, stream);
    case KVT_BF16: return launch_typed<KVT_BF16>(y, x, w, m, accumulate, stream);
    case KVT_F32: return launch_typed<KVT_F32>(y, x, w, m, accumulate, stream);
    case KVT_Q8_0: return launch_typed<KVT_Q8_0>(y, x, w, m, accumulate, stream);
    default: return cudaErrorInvalidValue;
  }
}

cudaError_t launch_matmul(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                          cudaStream_t stream) {
  if (m <= 0) return cudaErrorInvalidValue;
  if (w.type != KVT_F32) {
    return m <= kSkinnyMaxM ? launch_gemm_skinny(y, x, w, m, accumulate, stream)
                            : launch_gemm(y, x, w, m, accumulate, stream);
  }
  for (int m0 = 0; m0 < m; m0 += kGemvMaxM) {
    const int mm = m - m0 < kGemvMaxM ? m - m0 : kGemvMaxM;
    const cudaError_t e = launch_gemv(y + (size_t)m0 * w.rows, x + (size_t)m0 * w.cols, w, mm,
                                      accumulate, stream);
    if (e != cudaSuccess) return e;
  }
  return cudaSuccess;
}

}  // namespace kvt_cuda
