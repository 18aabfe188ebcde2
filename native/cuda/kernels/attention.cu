// Causal grouped-query attention over the paged KV pool (prefill and decode).
//
// Canonical arithmetic (what makes a row's result independent of T, of the
// tiling and of the split): the keys of a row are cut into spans of
// kSpanChunks pages (512 tokens). A span's partial (m, l, acc) is an online
// softmax over its pages in order, from (−inf, 0, 0); the row's state is the
// left fold of merge() over spans 0, 1, 2, …; out = acc / l. Every step is
// written with explicit-rounding intrinsics so no FMA contraction can differ
// between the two schedules that evaluate it:
//   fold  (gridDim.z == 1): one block folds all spans of its rows in-kernel;
//   split (gridDim.z == n_spans, decode): block z computes span z's partial,
//         attention_combine_kernel folds them in the same order.
//
// One block owns a tile of query rows that share one KV head: QT tokens × G
// query heads (G = n_head / n_kv), at most kRows = 64 rows, so every K/V page
// loaded into shared memory is reused by all G heads of the group.
//
//   grid (q_tiles, n_kv, 1 | n_spans)   block 256 = 8 warps, warp w owns rows w, w+8, ...
//   smem  qs[64][HD] f32 (pre-scaled q) | vs[64][HD] f16 | ks[64][HD+2] f16
//         (padded: conflict-free per-lane key rows)
//   lane l scores keys l and l+32 of a page, then owns output dims
//   [l*HD/32, (l+1)*HD/32) for the P·V update.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

constexpr int kRows = 64;
constexpr int kWarps = 8;
constexpr int kRowsPerWarp = kRows / kWarps;
constexpr int kSpanChunks = 8;
constexpr size_t kMaxWorkspace = 256ull << 20;

int tile_tokens(int group) { return kRows / group; }

template <int HD>
size_t smem_bytes() {
  return (size_t)kRows * HD * sizeof(float) + (size_t)kPageTokens * (HD + 2) * sizeof(__half) +
         (size_t)kPageTokens * HD * sizeof(__half);
}

int n_spans_for(int t, int pos0) {
  const int n_chunks = (pos0 + t - 1) / kPageTokens + 1;
  return (n_chunks + kSpanChunks - 1) / kSpanChunks;
}

size_t split_workspace(int t, int n_head, int hd, int pos0) {
  return (size_t)n_spans_for(t, pos0) * t * n_head * (hd * sizeof(float) + sizeof(float2));
}

// Split only when the fold would leave most SMs idle (decode); either way the
// numbers are the same.
bool use_split(int t, int n_head, int n_kv, int hd, int pos0, int n_sm) {
  const int q_tiles = (t + tile_tokens(n_head / n_kv) - 1) / tile_tokens(n_head / n_kv);
  return q_tiles * n_kv < n_sm && n_spans_for(t, pos0) > 1 &&
         split_workspace(t, n_head, hd, pos0) <= kMaxWorkspace;
}

// (M, L, ACC) ← merge((M, L, ACC), (m, l, acc)); an empty partial (m = −inf) is the identity.
template <int DPL>
__device__ __forceinline__ void merge(float& M, float& L, float (&ACC)[DPL], float m, float l,
                                      const float (&acc)[DPL]) {
  if (m == -INFINITY) return;
  if (M == -INFINITY) {
    M = m;
    L = l;
#pragma unroll
    for (int d = 0; d < DPL; ++d) ACC[d] = acc[d];
    return;
  }
  const float nm = fmaxf(M, m);
  const float sa = expf(__fsub_rn(M, nm)), sb = expf(__fsub_rn(m, nm));
  L = __fadd_rn(__fmul_rn(L, sa), __fmul_rn(l, sb));
#pragma unroll
  for (int d = 0; d < DPL; ++d) ACC[d] = __fadd_rn(__fmul_rn(ACC[d], sa), __fmul_rn(acc[d], sb));
  M = nm;
}

// out[T,n_head,HD] (fold) or span partials ws_acc[n_spans][T][n_head][HD],
// ws_ml[n_spans][T][n_head] = (m, l) (split); q[T,n_head,HD] f32; keys of
// layer `layer` read from kv pages via kv.block_table.
template <int HD>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(float* __restrict__ out, const float* __restrict__ q, PagedKv kv, int layer,
                     int T, int n_head, int pos0, float scale, float* __restrict__ ws_acc,
                     float2* __restrict__ ws_ml) {
  constexpr int DPL = HD / 32;
  constexpr int KS = HD + 2;
  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);
  __half* vs = reinterpret_cast<__half*>(qs + kRows * HD);
  __half* ks = vs + kPageTokens * HD;

  const int n_kv = kv.n_kv_heads;
  const int group = n_head / n_kv;
  const int qt = kRows / group;
  const int t0 = blockIdx.x * qt;
  const int kvh = blockIdx.y;
  const bool split = gridDim.z > 1;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows = min(qt, T - t0) * group;

  for (int e = threadIdx.x; e < rows * HD; e += blockDim.x) {
    const int r = e / HD, d = e % HD;
    const int t = t0 + r / group, h = kvh * group + r % group;
    qs[e] = __fmul_rn(q[((size_t)t * n_head + h) * HD + d], scale);
  }

  const int n_chunks = (pos0 + t0 + rows / group - 1) / kPageTokens + 1;
  const int c_begin = split ? blockIdx.z * kSpanChunks : 0;
  const int c_end = split ? min(n_chunks, c_begin + kSpanChunks) : n_chunks;

  // Fold state (unused in split mode) and the current span's partial.
  float M[kRowsPerWarp], L[kRowsPerWarp], ACC[kRowsPerWarp][DPL];
  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    M[i] = m[i] = -INFINITY;
    L[i] = l[i] = 0.f;
#pragma unroll
    for (int d = 0; d < DPL; ++d) ACC[i][d] = acc[i][d] = 0.f;
  }

  for (int c = c_begin; c < c_end; ++c) {
    __syncthreads();  // previous page consumed (and qs written, the first time)
    const __half* page = kv.pages + (size_t)kv.block_table[c] * kv.page_elems;
    const uint4* kg = reinterpret_cast<const uint4*>(page + page_offset(n_kv, HD, layer, 0, kvh, 0));
    const uint4* vg = reinterpret_cast<const uint4*>(page + page_offset(n_kv, HD, layer, 1, kvh, 0));
    for (int e = threadIdx.x; e < kPageTokens * HD / 8; e += blockDim.x) {
      const uint4 kr = kg[e];
      const int row = (e * 8) / HD, col = (e * 8) % HD;
      uint32_t* kd = reinterpret_cast<uint32_t*>(ks + row * KS + col);
      kd[0] = kr.x; kd[1] = kr.y; kd[2] = kr.z; kd[3] = kr.w;
      reinterpret_cast<uint4*>(vs)[e] = vg[e];
    }
    __syncthreads();

#pragma unroll
    for (int i = 0; i < kRowsPerWarp; ++i) {
      const int r = warp + i * kWarps;
      if (r >= rows) break;
      const int pos = pos0 + t0 + r / group;
      const int key0 = c * kPageTokens;
      if (key0 <= pos) {
        const float* qr = qs + r * HD;
        const __half* k0 = ks + lane * KS;
        const __half* k1 = ks + (lane + 32) * KS;
        float s0 = 0.f, s1 = 0.f;
#pragma unroll 8
        for (int d = 0; d < HD; d += 2) {
          const float2 qq = *reinterpret_cast<const float2*>(qr + d);
          const float2 a = __half22float2(*reinterpret_cast<const __half2*>(k0 + d));
          const float2 b = __half22float2(*reinterpret_cast<const __half2*>(k1 + d));
          s0 = __fmaf_rn(qq.y, a.y, __fmaf_rn(qq.x, a.x, s0));
          s1 = __fmaf_rn(qq.y, b.y, __fmaf_rn(qq.x, b.x, s1));
        }
        if (key0 + lane > pos) s0 = -INFINITY;
        if (key0 + lane + 32 > pos) s1 = -INFINITY;
        const float m_new = fmaxf(m[i], warp_max(fmaxf(s0, s1)));  // finite: key0 ≤ pos
        const float corr = expf(__fsub_rn(m[i], m_new));
        const float p0 = expf(__fsub_rn(s0, m_new)), p1 = expf(__fsub_rn(s1, m_new));
        l[i] = __fadd_rn(__fmul_rn(l[i], corr), warp_sum(__fadd_rn(p0, p1)));
        m[i] = m_new;
#pragma unroll
        for (int d = 0; d < DPL; ++d) acc[i][d] = __fmul_rn(acc[i][d], corr);
#pragma unroll 4
        for (int j = 0; j < 32; ++j) {
          const float pa = __shfl_sync(0xffffffffu, p0, j);
          const float pb = __shfl_sync(0xffffffffu, p1, j);
          const __half* va = vs + j * HD + lane * DPL;
          const __half* vb = vs + (j + 32) * HD + lane * DPL;
#pragma unroll
          for (int d = 0; d < DPL; d += 2) {
            const float2 x = __half22float2(*reinterpret_cast<const __half2*>(va + d));
            const float2 y = __half22float2(*reinterpret_cast<const __half2*>(vb + d));
            acc[i][d] = __fmaf_rn(pb, y.x, __fmaf_rn(pa, x.x, acc[i][d]));
            acc[i][d + 1] = __fmaf_rn(pb, y.y, __fmaf_rn(pa, x.y, acc[i][d + 1]));
          }
        }
      }
      // End of a span in fold mode: fold its partial in, start the next one.
      if (!split && ((c + 1) % kSpanChunks == 0 || c + 1 == c_end)) {
        merge<DPL>(M[i], L[i], ACC[i], m[i], l[i], acc[i]);
        m[i] = -INFINITY;
        l[i] = 0.f;
#pragma unroll
        for (int d = 0; d < DPL; ++d) acc[i][d] = 0.f;
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + i * kWarps;
    if (r >= rows) break;
    const int t = t0 + r / group, h = kvh * group + r % group;
    const size_t row = (size_t)t * n_head + h;
    if (!split) {
#pragma unroll
      for (int d = 0; d < DPL; ++d) out[row * HD + lane * DPL + d] = __fdiv_rn(ACC[i][d], L[i]);
    } else {
      const size_t prow = (size_t)blockIdx.z * T * n_head + row;
#pragma unroll
      for (int d = 0; d < DPL; ++d) ws_acc[prow * HD + lane * DPL + d] = acc[i][d];
      if (lane == 0) ws_ml[prow] = make_float2(m[i], l[i]);
    }
  }
}

// out[T,n_head,HD] = fold of merge() over the span partials, in span order.
//   grid (T, n_head), block 32: lane l owns dims [l*HD/32, (l+1)*HD/32) as in the main kernel.
template <int HD>
__global__ void attention_combine_kernel(float* __restrict__ out, const float* __restrict__ ws_acc,
                                         const float2* __restrict__ ws_ml, int T, int n_head,
                                         int n_spans) {
  constexpr int DPL = HD / 32;
  const size_t row = (size_t)blockIdx.x * n_head + blockIdx.y;
  const size_t stride = (size_t)T * n_head;
  float M = -INFINITY, L = 0.f, ACC[DPL];
#pragma unroll
  for (int d = 0; d < DPL; ++d) ACC[d] = 0.f;
  for (int z = 0; z < n_spans; ++z) {
    const float2 ml = ws_ml[z * stride + row];
    float acc[DPL];
#pragma unroll
    for (int d = 0; d < DPL; ++d) acc[d] = ws_acc[(z * stride + row) * HD + threadIdx.x * DPL + d];
    merge<DPL>(M, L, ACC, ml.x, ml.y, acc);
  }
#pragma unroll
  for (int d = 0; d < DPL; ++d) out[row * HD + threadIdx.x * DPL + d] = __fdiv_rn(ACC[d], L);
}

template <int HD>
cudaError_t launch_hd(float* out, const float* q, const PagedKv& kv, int layer, int t,
                      int n_head, int pos0, float scale, bool split, float* ws_acc, float2* ws_ml,
                      cudaStream_t stream) {
  static bool attr_set = false;  // idempotent; racing first calls set the same value
  const size_t smem = smem_bytes<HD>();
  if (!attr_set) {
    const cudaError_t e = cudaFuncSetAttribute(
        attention_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    attr_set = true;
  }
  const int qt = tile_tokens(n_head / kv.n_kv_heads);
  const int n_spans = split ? n_spans_for(t, pos0) : 1;
  const dim3 grid((t + qt - 1) / qt, kv.n_kv_heads, n_spans);
  attention_kernel<HD><<<grid, kWarps * 32, smem, stream>>>(out, q, kv, layer, t, n_head, pos0,
                                                            scale, ws_acc, ws_ml);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || !split) return e;
  attention_combine_kernel<HD><<<dim3(t, n_head), 32, 0, stream>>>(out, ws_acc, ws_ml, t, n_head,
                                                                   n_spans);
  return cudaGetLastError();
}

}  // namespace

size_t attention_workspace_bytes(int t, int n_head, int n_kv, int hd, int pos0, int n_sm) {
  if (t <= 0 || n_kv <= 0 || n_head % n_kv != 0) return 0;
  return use_split(t, n_head, n_kv, hd, pos0, n_sm) ? split_workspace(t, n_head, hd, pos0) : 0;
}

cudaError_t launch_attention(float* out, const float* q, const PagedKv& kv, int layer, int t,
                             int n_head, int pos0, float scale, void* workspace,
                             size_t workspace_bytes, int n_sm, cudaStream_t stream) {
  const int n_kv = kv.n_kv_heads;
  if (t <= 0 || n_kv <= 0 || n_head % n_kv != 0 || n_head / n_kv > kRows ||
      (pos0 + t - 1) / kPageTokens >= kv.n_blocks || layer < 0 || layer >= kv.n_layers)
    return cudaErrorInvalidValue;
  bool split = use_split(t, n_head, n_kv, kv.head_dim, pos0, n_sm);
  // Without enough workspace fold in-kernel: slower for decode, same numbers.
  if (split && workspace_bytes < split_workspace(t, n_head, kv.head_dim, pos0)) split = false;
  float* ws_acc = static_cast<float*>(workspace);
  float2* ws_ml = split ? reinterpret_cast<float2*>(ws_acc + (size_t)n_spans_for(t, pos0) * t *
                                                                 n_head * kv.head_dim)
                        : nullptr;
  switch (kv.head_dim) {
    case 64:
      return launch_hd<64>(out, q, kv, layer, t, n_head, pos0, scale, split, ws_acc, ws_ml, stream);
    case 128:
      return launch_hd<128>(out, q, kv, layer, t, n_head, pos0, scale, split, ws_acc, ws_ml, stream);
    default:
      return cudaErrorInvalidValue;  // the host runtime reports which head dims exist
  }
}

}  // namespace kvt_cuda
