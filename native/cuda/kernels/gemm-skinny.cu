// Tensor-core GEMM for decode-sized batches (M ≤ 16), bit-identical to gemm.cu.
//
// Why a second tensor-core kernel instead of a CUDA-core GEMV: the backend
// contract is that an output element never depends on how many rows share the
// call (the engine's cache-equivalence check compares "prefill all" with
// "import blocks + prefill the rest" bit for bit). Every element of both
// kernels is the same chain: acc = 0; for k16 = 0, 16, 32, …: acc = mma(acc,
// f16(x[m][k16..]), f16(w[n][k16..])) with WMMA 16x16x16 — and a tensor-core
// dot product depends only on its own operands, not on its tile neighbours.
//
// Layout: block = 2 warps, warp w owns output columns n0 + 16w .. +16 for all
// (≤ 16, zero-padded) rows. X is staged in KC-wide chunks, rounded exactly as
// gemm.cu rounds it; F16/BF16 weight fragments load straight from global
// memory (W[n][k] row-major = Wᵀ column-major, ldm = K); Q8_0 fragments are
// dequantised per warp into shared memory first (same f16(d·q) rounding).
#include <mma.h>

#include "kernels.cuh"

namespace kvt_cuda {
namespace {

using namespace nvcuda;

constexpr int kWarps = 2;
constexpr int BN = 16 * kWarps;
constexpr int KC = 256;         // X chunk (k) staged per step
constexpr int XS = KC + 16;     // smem row stride of the X chunk (halves; 32-byte aligned rows)
constexpr int QS = 16 + 16;     // smem stride of a dequantised 16x16 Q8_0 tile

template <typename T> __device__ inline T to_elem(float v);
template <> __device__ inline __half to_elem<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 to_elem<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Y[M,N] (=|+=) X[M,K] · W[N,K]^T,  M ≤ 16;  x f32 [M][K], w [N][K], y f32 [M][N]
//   grid ceil(N/32), block 64; K % 32 == 0.
template <typename T, int WTYPE>
__global__ void __launch_bounds__(kWarps * 32)
    gemm_skinny_kernel(float* __restrict__ y, const float* __restrict__ x, DeviceWeight w, int M,
                       int accumulate) {
  __shared__ __align__(32) T xs[16][XS];
  __shared__ __align__(32) T qs[kWarps][16][QS];
  __shared__ __align__(32) float cs[kWarps][16][16];

  const int N = w.rows, K = w.cols;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int n0 = blockIdx.x * BN + warp * 16;
  const bool active = n0 < N;
  // Columns past N (a partial last tile) read row N-1 and are dropped on store.
  const int n_load = active ? n0 : 0;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc;
  wmma::fill_fragment(acc, 0.f);

  for (int kc = 0; kc < K; kc += KC) {
    const int kw = min(KC, K - kc);  // multiple of 32
    __syncthreads();
    for (int e = threadIdx.x; e < 16 * kw; e += blockDim.x) {
      const int r = e / kw, c = e % kw;
      xs[r][c] = to_elem<T>(r < M ? x[(size_t)r * K + kc + c] : 0.f);
    }
    __syncthreads();
    if (!active) continue;
    for (int kk = 0; kk < kw; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa;
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb;
      wmma::load_matrix_sync(fa, &xs[0][kk], XS);
      if constexpr (WTYPE == KVT_Q8_0) {
        // lane → (row lane/2, 8 values at k offset (lane%2)*8)
        const int r = lane >> 1, c8 = (lane & 1) * 8;
        const int n = min(n_load + r, N - 1);
        const int k = kc + kk + c8;
        const uint2 raw = *reinterpret_cast<const uint2*>(static_cast<const int8_t*>(w.data) +
                                                          (size_t)n * K + k);
        const int8_t* q = reinterpret_cast<const int8_t*>(&raw);
        const float d = __half2float(w.scales[(size_t)n * (K / kQ8Group) + k / kQ8Group]);
        __align__(16) T vals[8];
#pragma unroll
        for (int j = 0; j < 8; ++j) vals[j] = to_elem<T>(d * (float)q[j]);
        *reinterpret_cast<uint4*>(&qs[warp][r][c8]) = *reinterpret_cast<const uint4*>(vals);
        __syncwarp();
        wmma::load_matrix_sync(fb, &qs[warp][0][0], QS);
        __syncwarp();
      } else if (n_load + 16 <= N) {
        wmma::load_matrix_sync(fb, static_cast<const T*>(w.data) + (size_t)n_load * K + kc + kk, K);
      } else {
        // Partial tile: stage the in-range rows (others zero) so no load runs past W.
        const int r = lane >> 1, c8 = (lane & 1) * 8;
        const int n = n_load + r;
        uint4 v = make_uint4(0, 0, 0, 0);
        if (n < N) v = *reinterpret_cast<const uint4*>(static_cast<const T*>(w.data) + (size_t)n * K + kc + kk + c8);
        *reinterpret_cast<uint4*>(&qs[warp][r][c8]) = v;
        __syncwarp();
        wmma::load_matrix_sync(fb, &qs[warp][0][0], QS);
        __syncwarp();
      }
      wmma::mma_sync(acc, fa, fb, acc);
    }
  }
  if (!active) return;
  wmma::store_matrix_sync(&cs[warp][0][0], acc, 16, wmma::mem_row_major);
  __syncwarp();
  for (int e = lane; e < 16 * 16; e += 32) {
    const int r = e / 16, c = e % 16;
    const int n = n0 + c;
    if (r < M && n < N) {
      float* dst = y + (size_t)r * N + n;
      *dst = accumulate ? *dst + cs[warp][r][c] : cs[warp][r][c];
    }
  }
}

}  // namespace

cudaError_t launch_gemm_skinny(float* y, const float* x, const DeviceWeight& w, int m,
                               bool accumulate, cudaStream_t stream) {
  if (w.cols % 32 != 0 || m <= 0 || m > kSkinnyMaxM) return cudaErrorInvalidValue;
  const dim3 grid((w.rows + BN - 1) / BN);
  switch (w.type) {
    case KVT_F16:
      gemm_skinny_kernel<__half, KVT_F16><<<grid, kWarps * 32, 0, stream>>>(y, x, w, m, accumulate);
      break;
    case KVT_BF16:
      gemm_skinny_kernel<__nv_bfloat16, KVT_BF16><<<grid, kWarps * 32, 0, stream>>>(y, x, w, m, accumulate);
      break;
    case KVT_Q8_0:
      gemm_skinny_kernel<__half, KVT_Q8_0><<<grid, kWarps * 32, 0, stream>>>(y, x, w, m, accumulate);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kvt_cuda
