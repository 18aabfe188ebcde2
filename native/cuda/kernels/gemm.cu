// Tensor-core GEMM for linear layers (prefill-sized batches).
#include <mma.h>
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

using namespace nvcuda;

constexpr int BM = 64, BN = 64, BK = 32;  // block tile; BK == one Q8_0 group
constexpr int PAD = 8;                    // halves; keeps ldm a multiple of 8 and skews banks
constexpr int LDS = BK + PAD;             // smem row stride of the A and B tiles
constexpr int LDC = BN + 4;               // smem row stride of the f32 epilogue tile
constexpr int kThreads = 128;             // 4 warps in 2x2, each a 32x32 sub-tile

template <typename T> __device__ inline T to_elem(float v);
template <> __device__ inline __half to_elem<__half>(float v) { return __float2half_rn(v); }
template <> __device__ inline __nv_bfloat16 to_elem<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}

// Registers holding one block tile in flight (global → regs → smem), so the
// next tile's loads overlap the current tile's MMAs.
struct TileRegs {
  float4 a[4];   // X: 64x32 f32 = 512 float4, 4 per thread
  uint4 b[2];    // W: 64x32 16-bit = 256 uint4, 2 per thread (Q8_0 uses b[0] + scale)
  float b_scale; // Q8_0 scale of this thread's row
};

template <int WTYPE>
__device__ inline void load_tile(TileRegs& r, const float* __restrict__ x,
                                 const DeviceWeight& w, int m0, int n0, int k0, int M) {
  const int tid = threadIdx.x;
  const int K = w.cols, N = w.rows;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    const int m = m0 + row;
    r.a[i] = m < M ? *reinterpret_cast<const float4*>(x + (size_t)m * K + k0 + c4 * 4)
                   : make_float4(0.f, 0.f, 0.f, 0.f);
  }
  if constexpr (WTYPE == KVT_Q8_0) {
    const int row = tid >> 1, half16 = tid & 1;
    const int n = n0 + row;
    if (n < N) {
      const int8_t* q = static_cast<const int8_t*>(w.data) + (size_t)n * K + k0 + half16 * 16;
      r.b[0] = *reinterpret_cast<const uint4*>(q);
      r.b_scale = __half2float(w.scales[(size_t)n * (K / kQ8Group) + k0 / kQ8Group]);
    } else {
      r.b[0] = make_uint4(0, 0, 0, 0);
      r.b_scale = 0.f;
    }
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx >> 2, c8 = idx & 3;
      const int n = n0 + row;
      r.b[i] = n < N ? *reinterpret_cast<const uint4*>(static_cast<const uint16_t*>(w.data) +
                                                       (size_t)n * K + k0 + c8 * 8)
                     : make_uint4(0, 0, 0, 0);
    }
  }
}

template <typename T, int WTYPE>
__device__ inline void store_tile(const TileRegs& r, T (*as)[LDS], T (*bs)[LDS]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int idx = tid + i * kThreads;
    const int row = idx >> 3, c4 = idx & 7;
    T* dst = &as[row][c4 * 4];
    dst[0] = to_elem<T>(r.a[i].x);
    dst[1] = to_elem<T>(r.a[i].y);
    dst[2] = to_elem<T>(r.a[i].z);
    dst[3] = to_elem<T>(r.a[i].w);
  }
  if constexpr (WTYPE == KVT_Q8_0) {
    const int row = tid >> 1, half16 = tid & 1;
    const int8_t* q = reinterpret_cast<const int8_t*>(&r.b[0]);
    __align__(16) T vals[16];
#pragma unroll
    for (int j = 0; j < 16; ++j) vals[j] = to_elem<T>(r.b_scale * (float)q[j]);
    uint4* dst = reinterpret_cast<uint4*>(&bs[row][half16 * 16]);
    dst[0] = reinterpret_cast<const uint4*>(vals)[0];
    dst[1] = reinterpret_cast<const uint4*>(vals)[1];
  } else {
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      const int idx = tid + i * kThreads;
      const int row = idx >> 2, c8 = idx & 3;
      *reinterpret_cast<uint4*>(&bs[row][c8 * 8]) = r.b[i];
    }
  }
}

// Y[M,N] (=|+=) X[M,K] · W[N,K]^T
//   x: f32 [M][K] row-major; w: [N][K] (F16 | BF16 | Q8_0 planes); y: f32 [M][N]
//   grid (ceil(N/64), ceil(M/64)), block 128; K % 32 == 0.
// T is the tensor-core input type: __half for F16/Q8_0, __nv_bfloat16 for BF16.
template <typename T, int WTYPE>
__global__ void __launch_bounds__(kThreads)
    gemm_kernel(float* __restrict__ y, const float* __restrict__ x, DeviceWeight w, int M,
                int accumulate) {
  __shared__ __align__(32) T as[BM][LDS];
  __shared__ __align__(32) T bs[BN][LDS];
  __shared__ __align__(32) float cs[BM][LDC];

  const int N = w.rows, K = w.cols;
  const int n0 = blockIdx.x * BN, m0 = blockIdx.y * BM;
  const int warp = threadIdx.x >> 5;
  const int wm = (warp >> 1) * 32, wn = (warp & 1) * 32;

  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[2][2];
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) wmma::fill_fragment(acc[i][j], 0.f);

  TileRegs regs;
  load_tile<WTYPE>(regs, x, w, m0, n0, 0, M);
  store_tile<T, WTYPE>(regs, as, bs);
  __syncthreads();

  const int k_tiles = K / BK;
  for (int kt = 0; kt < k_tiles; ++kt) {
    const bool has_next = kt + 1 < k_tiles;
    if (has_next) load_tile<WTYPE>(regs, x, w, m0, n0, (kt + 1) * BK, M);
#pragma unroll
    for (int kk = 0; kk < BK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> fa[2];
      // B = W^T; the smem tile is W[n][k], i.e. B in column-major order.
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> fb[2];
#pragma unroll
      for (int i = 0; i < 2; ++i) wmma::load_matrix_sync(fa[i], &as[wm + i * 16][kk], LDS);
#pragma unroll
      for (int j = 0; j < 2; ++j) wmma::load_matrix_sync(fb[j], &bs[wn + j * 16][kk], LDS);
#pragma unroll
      for (int i = 0; i < 2; ++i)
#pragma unroll
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
    if (has_next) {
      store_tile<T, WTYPE>(regs, as, bs);
      __syncthreads();
    }
  }

#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j)
      wmma::store_matrix_sync(&cs[wm + i * 16][wn + j * 16], acc[i][j], LDC, wmma::mem_row_major);
  __syncthreads();

  for (int idx = threadIdx.x; idx < BM * BN; idx += kThreads) {
    const int r = idx / BN, c = idx % BN;
    const int m = m0 + r, n = n0 + c;
    if (m < M && n < N) {
      float* dst = y + (size_t)m * N + n;
      *dst = accumulate ? *dst + cs[r][c] : cs[r][c];
    }
  }
}

}  // namespace

cudaError_t launch_gemm(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                        cudaStream_t stream) {
  if (w.cols % BK != 0 || m <= 0) return cudaErrorInvalidValue;
  const dim3 grid((w.rows + BN - 1) / BN, (m + BM - 1) / BM);
  switch (w.type) {
    case KVT_F16:
      gemm_kernel<__half, KVT_F16><<<grid, kThreads, 0, stream>>>(y, x, w, m, accumulate);
      break;
    case KVT_BF16:
      gemm_kernel<__nv_bfloat16, KVT_BF16><<<grid, kThreads, 0, stream>>>(y, x, w, m, accumulate);
      break;
    case KVT_Q8_0:
      gemm_kernel<__half, KVT_Q8_0><<<grid, kThreads, 0, stream>>>(y, x, w, m, accumulate);
      break;
    default:
      return cudaErrorInvalidValue;
  }
  return cudaGetLastError();
}

}  // namespace kvt_cuda
