// Causal grouped-query attention over the paged KV pool (prefill and decode).
//
// One block owns a tile of query rows that share one KV head: QT tokens × G
// query heads (G = n_head / n_kv), at most kRows = 64 rows, so every K/V chunk
// loaded into shared memory is reused by all G heads of the group. The key
// range is walked one page (64 tokens) at a time with an online softmax
// (flash-attention style), optionally split across gridDim.z blocks for
// decode, whose partials a second kernel merges:
//
//   grid (q_tiles, n_kv, splits)          block 256 = 8 warps, warp w owns rows w, w+8, ...
//   smem  qs[64][HD] f32 (pre-scaled q) | ks[64][HD+2] f16 (padded: conflict-free
//         per-lane key rows) | vs[64][HD] f16
//   lane l scores keys l and l+32 of the chunk, then owns output dims
//   [l*HD/32, (l+1)*HD/32) for the P·V update.
#include "kernels.cuh"

namespace kvt_cuda {
namespace {

constexpr int kRows = 64;
constexpr int kWarps = 8;
constexpr int kRowsPerWarp = kRows / kWarps;
constexpr int kMaxSplits = 64;

int rows_tile_tokens(int group) { return kRows / group; }

template <int HD>
size_t smem_bytes() {
  return (size_t)kRows * HD * sizeof(float) + (size_t)kPageTokens * (HD + 2) * sizeof(__half) +
         (size_t)kPageTokens * HD * sizeof(__half);
}

struct SplitPlan {
  int splits;
  int chunks_per_split;
};

SplitPlan plan_splits(int t, int n_head, int n_kv, int pos0, int n_sm) {
  const int group = n_head / n_kv;
  const int qt = rows_tile_tokens(group);
  const int q_tiles = (t + qt - 1) / qt;
  const int blocks = q_tiles * n_kv;
  const int n_chunks = (pos0 + t - 1) / kPageTokens + 1;
  int splits = 1;
  if (blocks < n_sm && n_chunks > 1) {
    splits = (2 * n_sm + blocks - 1) / blocks;
    if (splits > n_chunks) splits = n_chunks;
    if (splits > kMaxSplits) splits = kMaxSplits;
  }
  const int cps = (n_chunks + splits - 1) / splits;
  return {(n_chunks + cps - 1) / cps, cps};
}

// out[T,n_head,HD] (splits == 1) or partials ws_acc[splits][T][n_head][HD],
// ws_ml[splits][T][n_head][2] = (running max, running sum);
// q[T,n_head,HD] f32; keys of layer `layer` read from kv pages via kv.block_table.
template <int HD>
__global__ void __launch_bounds__(kWarps * 32)
    attention_kernel(float* __restrict__ out, const float* __restrict__ q, PagedKv kv, int layer,
                     int T, int n_head, int pos0, float scale, int chunks_per_split,
                     float* __restrict__ ws_acc, float2* __restrict__ ws_ml) {
  constexpr int DPL = HD / 32;   // output dims per lane
  constexpr int KS = HD + 2;     // padded key row stride (halves)
  extern __shared__ __align__(16) unsigned char smem[];
  float* qs = reinterpret_cast<float*>(smem);
  __half* vs = reinterpret_cast<__half*>(qs + kRows * HD);
  __half* ks = vs + kPageTokens * HD;

  const int n_kv = kv.n_kv_heads;
  const int group = n_head / n_kv;
  const int qt = kRows / group;
  const int t0 = blockIdx.x * qt;
  const int kvh = blockIdx.y;
  const int split = blockIdx.z;
  const int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
  const int rows = min(qt, T - t0) * group;

  for (int e = threadIdx.x; e < rows * HD; e += blockDim.x) {
    const int r = e / HD, d = e % HD;
    const int t = t0 + r / group, h = kvh * group + r % group;
    qs[e] = q[((size_t)t * n_head + h) * HD + d] * scale;
  }

  const int max_pos = pos0 + t0 + rows / group - 1;
  const int n_chunks = max_pos / kPageTokens + 1;
  const int c_begin = split * chunks_per_split;
  const int c_end = min(n_chunks, c_begin + chunks_per_split);

  float m[kRowsPerWarp], l[kRowsPerWarp], acc[kRowsPerWarp][DPL];
#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.f;
#pragma unroll
    for (int d = 0; d < DPL; ++d) acc[i][d] = 0.f;
  }

  for (int c = c_begin; c < c_end; ++c) {
    __syncthreads();  // previous chunk fully consumed (and qs written, first time)
    const __half* page = kv.pages + (size_t)kv.block_table[c] * kv.page_elems;
    const uint4* kg =
        reinterpret_cast<const uint4*>(page + page_offset(n_kv, HD, layer, 0, kvh, 0));
    const uint4* vg =
        reinterpret_cast<const uint4*>(page + page_offset(n_kv, HD, layer, 1, kvh, 0));
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
      if (key0 > pos) continue;  // whole chunk in this row's future
      const float* qr = qs + r * HD;
      const __half* k0 = ks + lane * KS;
      const __half* k1 = ks + (lane + 32) * KS;
      float s0 = 0.f, s1 = 0.f;
#pragma unroll 8
      for (int d = 0; d < HD; d += 2) {
        const float2 qq = *reinterpret_cast<const float2*>(qr + d);
        const float2 a = __half22float2(*reinterpret_cast<const __half2*>(k0 + d));
        const float2 b = __half22float2(*reinterpret_cast<const __half2*>(k1 + d));
        s0 += qq.x * a.x + qq.y * a.y;
        s1 += qq.x * b.x + qq.y * b.y;
      }
      if (key0 + lane > pos) s0 = -INFINITY;
      if (key0 + lane + 32 > pos) s1 = -INFINITY;
      const float m_new = fmaxf(m[i], warp_max(fmaxf(s0, s1)));  // finite: key0 ≤ pos
      const float corr = expf(m[i] - m_new);
      const float p0 = expf(s0 - m_new), p1 = expf(s1 - m_new);
      l[i] = l[i] * corr + warp_sum(p0 + p1);
      m[i] = m_new;
#pragma unroll
      for (int d = 0; d < DPL; ++d) acc[i][d] *= corr;
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
          acc[i][d] += pa * x.x + pb * y.x;
          acc[i][d + 1] += pa * x.y + pb * y.y;
        }
      }
    }
  }

#pragma unroll
  for (int i = 0; i < kRowsPerWarp; ++i) {
    const int r = warp + i * kWarps;
    if (r >= rows) break;
    const int t = t0 + r / group, h = kvh * group + r % group;
    const size_t row = (size_t)t * n_head + h;
    if (gridDim.z == 1) {
      const float inv = 1.f / l[i];
#pragma unroll
      for (int d = 0; d < DPL; ++d) out[row * HD + lane * DPL + d] = acc[i][d] * inv;
    } else {
      const size_t prow = (size_t)split * T * n_head + row;
#pragma unroll
      for (int d = 0; d < DPL; ++d) ws_acc[prow * HD + lane * DPL + d] = acc[i][d];
      if (lane == 0) ws_ml[prow] = make_float2(m[i], l[i]);
    }
  }
}

// out[T,n_head,HD] = Σ_z acc_z·e^{m_z−M} / Σ_z l_z·e^{m_z−M}, M = max_z m_z.
//   grid (T, n_head), block HD. Splits that saw no key carry (−inf, 0).
__global__ void attention_combine_kernel(float* __restrict__ out, const float* __restrict__ ws_acc,
                                         const float2* __restrict__ ws_ml, int T, int n_head,
                                         int hd, int splits) {
  const size_t row = (size_t)blockIdx.x * n_head + blockIdx.y;
  const size_t stride = (size_t)T * n_head;
  float mx = -INFINITY;
  for (int z = 0; z < splits; ++z) mx = fmaxf(mx, ws_ml[z * stride + row].x);
  float num = 0.f, den = 0.f;
  for (int z = 0; z < splits; ++z) {
    const float2 ml = ws_ml[z * stride + row];
    if (ml.y == 0.f) continue;
    const float w = expf(ml.x - mx);
    num += ws_acc[(z * stride + row) * hd + threadIdx.x] * w;
    den += ml.y * w;
  }
  out[row * hd + threadIdx.x] = num / den;
}

template <int HD>
cudaError_t launch_hd(float* out, const float* q, const PagedKv& kv, int layer, int t,
                      int n_head, int pos0, float scale, const SplitPlan& plan, float* ws_acc,
                      float2* ws_ml, cudaStream_t stream) {
  static bool attr_set = false;  // idempotent; racing first calls set the same value
  const size_t smem = smem_bytes<HD>();
  if (!attr_set) {
    const cudaError_t e = cudaFuncSetAttribute(
        attention_kernel<HD>, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem);
    if (e != cudaSuccess) return e;
    attr_set = true;
  }
  const int qt = rows_tile_tokens(n_head / kv.n_kv_heads);
  const dim3 grid((t + qt - 1) / qt, kv.n_kv_heads, plan.splits);
  attention_kernel<HD><<<grid, kWarps * 32, smem, stream>>>(
      out, q, kv, layer, t, n_head, pos0, scale, plan.chunks_per_split, ws_acc, ws_ml);
  cudaError_t e = cudaGetLastError();
  if (e != cudaSuccess || plan.splits == 1) return e;
  attention_combine_kernel<<<dim3(t, n_head), HD, 0, stream>>>(out, ws_acc, ws_ml, t, n_head, HD,
                                                               plan.splits);
  return cudaGetLastError();
}

}  // namespace

size_t attention_workspace_bytes(int t, int n_head, int n_kv, int hd, int pos0, int n_sm) {
  if (t <= 0 || n_kv <= 0 || n_head % n_kv != 0) return 0;
  const SplitPlan plan = plan_splits(t, n_head, n_kv, pos0, n_sm);
  if (plan.splits == 1) return 0;
  return (size_t)plan.splits * t * n_head * (hd * sizeof(float) + sizeof(float2));
}

cudaError_t launch_attention(float* out, const float* q, const PagedKv& kv, int layer, int t,
                             int n_head, int pos0, float scale, void* workspace,
                             size_t workspace_bytes, int n_sm, cudaStream_t stream) {
  const int n_kv = kv.n_kv_heads;
  if (t <= 0 || n_kv <= 0 || n_head % n_kv != 0 || n_head / n_kv > kRows ||
      (pos0 + t - 1) / kPageTokens >= kv.n_blocks || layer < 0 || layer >= kv.n_layers)
    return cudaErrorInvalidValue;
  const SplitPlan plan = plan_splits(t, n_head, n_kv, pos0, n_sm);
  float* ws_acc = nullptr;
  float2* ws_ml = nullptr;
  if (plan.splits > 1) {
    if (workspace_bytes < attention_workspace_bytes(t, n_head, n_kv, kv.head_dim, pos0, n_sm))
      return cudaErrorInvalidValue;
    ws_acc = static_cast<float*>(workspace);
    ws_ml = reinterpret_cast<float2*>(ws_acc + (size_t)plan.splits * t * n_head * kv.head_dim);
  }
  switch (kv.head_dim) {
    case 64:
      return launch_hd<64>(out, q, kv, layer, t, n_head, pos0, scale, plan, ws_acc, ws_ml, stream);
    case 128:
      return launch_hd<128>(out, q, kv, layer, t, n_head, pos0, scale, plan, ws_acc, ws_ml, stream);
    default:
      return cudaErrorInvalidValue;  // the host runtime reports which head dims exist
  }
}

}  // namespace kvt_cuda
