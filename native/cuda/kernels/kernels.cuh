// Launchers of the kvtier CUDA kernels. Every launcher takes its outputs
// first, enqueues on `stream`, and returns the launch status (it never
// synchronises). Shapes are documented at each kernel.
#pragma once
#include "kvt-cuda-common.cuh"

namespace kvt_cuda {

// Y[M,N] (=|+=) X[M,K] · W[N,K]^T — tensor cores (WMMA 16x16x16, f32 accumulate).
// X is rounded to f16 (bf16 for BF16 weights) when staged; Q8_0 weights are
// dequantised to f16 tiles. Requires K % 32 == 0. 64x64 block tiles.
cudaError_t launch_gemm(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                        cudaStream_t stream);
// The same contract and bit-identical results for M ≤ kSkinnyMaxM (decode):
// 16(m) x 16(n) warp tiles so small batches still spread over the SMs.
constexpr int kSkinnyMaxM = 16;
cudaError_t launch_gemm_skinny(float* y, const float* x, const DeviceWeight& w, int m,
                               bool accumulate, cudaStream_t stream);
// CUDA-core GEMV (M ≤ kGemvMaxM), f32 math, X not rounded; the path of F32 weights.
constexpr int kGemvMaxM = 8;
cudaError_t launch_gemv(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                        cudaStream_t stream);
// The linear-layer entry point. An output element's value never depends on M:
// F16/BF16/Q8_0 always take the tensor-core chain (skinny or tiled kernel,
// which agree bit for bit), F32 always the GEMV chain.
cudaError_t launch_matmul(float* y, const float* x, const DeviceWeight& w, int m, bool accumulate,
                          cudaStream_t stream);

// y[T,d] = x[T,d] * rsqrt(mean(x^2) + eps) * w[d]
cudaError_t launch_rmsnorm(float* y, const float* x, const float* w, int t, int d, float eps,
                           cudaStream_t stream);

// In place on x[rows,heads,hd]; row r at position positions[r] (device);
// the first `rot` dims of each head rotate (rot = hd unless partial rotary).
cudaError_t launch_rope(float* x, const int32_t* positions, int rows, int heads, int hd, int rot,
                        float base, int mode, cudaStream_t stream);

// out[n] = silu(gate[n]) * up[n]   (out may alias gate)
cudaError_t launch_swiglu(float* out, const float* gate, const float* up, size_t n,
                          cudaStream_t stream);

// out[n] = a[n] + b[n]  (out may alias a or b)
cudaError_t launch_add(float* out, const float* a, const float* b, size_t n, cudaStream_t stream);

// out[T,d] = table[tokens[t]] as f32; table is a DeviceWeight [n_vocab][d].
cudaError_t launch_embed(float* out, const DeviceWeight& table, const int32_t* tokens, int t,
                         cudaStream_t stream);

// In place row softmax of x[rows,n].
cudaError_t launch_softmax(float* x, int rows, int n, cudaStream_t stream);
// out[rows] = argmax over n of x[rows,n] (lowest index on ties).
cudaError_t launch_argmax(int32_t* out, const float* x, int rows, int n, cudaStream_t stream);

// Writes k,v [T,n_kv,hd] (f32) as f16 into the pages of `kv`, layer `layer`,
// token t at position pos0 + t.
cudaError_t launch_kv_write(const PagedKv& kv, const float* k, const float* v, int layer, int t,
                            int pos0, cudaStream_t stream);

// Causal GQA attention over paged KV.
//   out[T,n_head,hd] = softmax(q·K^T * scale, causal) · V
//   q[T,n_head,hd]; query t is at position pos0 + t and sees keys 0..pos0+t of
//   layer `layer` (already written with launch_kv_write).
// `workspace` holds split-K partials; attention_workspace_bytes() sizes it.
size_t attention_workspace_bytes(int t, int n_head, int n_kv, int hd, int pos0, int n_sm);
cudaError_t launch_attention(float* out, const float* q, const PagedKv& kv, int layer, int t,
                             int n_head, int pos0, float scale, void* workspace,
                             size_t workspace_bytes, int n_sm, cudaStream_t stream);

// dst[n] = src[n] (src may be mapped pinned host memory); no copy engine involved.
cudaError_t launch_copy_i32(int32_t* dst, const int32_t* src, int n, cudaStream_t stream);

// Fills a weight's storage with deterministic uniform values in [-scale, scale]
// (Q8_0: quants uniform, scales = scale/127). For device-side benchmark models.
cudaError_t launch_fill_random(const DeviceWeight& w, uint64_t seed, float scale,
                               cudaStream_t stream);
// Fills an f32 vector with `value`.
cudaError_t launch_fill_f32(float* x, size_t n, float value, cudaStream_t stream);

}  // namespace kvt_cuda
