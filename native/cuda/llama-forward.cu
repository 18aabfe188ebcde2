// The llama forward pass on the device, composed from the kernels. The op
// sequence is the one of the CPU twin ref/llama-forward-ref.cc.
#include <algorithm>
#include <cmath>
#include <string>

#include "cuda-backend-internal.h"

namespace {

#define KVT_TRY(expr, what)                                      \
  do {                                                           \
    const kvt_cuda_status st_ = kvt_check(ctx, (expr), (what));  \
    if (st_ != KVT_CUDA_OK) return st_;                          \
  } while (0)

template <typename T>
cudaError_t grow(T*& p, size_t count) {
  cudaFree(p);
  p = nullptr;
  return cudaMalloc(&p, count * sizeof(T));
}

kvt_cuda_status ensure_scratch(kvt_cuda_model* m, int t, int n_blocks, int pos0) {
  kvt_cuda_ctx* ctx = m->ctx;
  kvt_forward_scratch& s = m->scratch;
  const kvt_llama_config& c = m->cfg;
  if (t > s.capacity_t) {
    cudaStreamSynchronize(ctx->compute);
    const size_t d = c.d_model, qd = (size_t)c.n_head * c.head_dim,
                 kvd = (size_t)c.n_kv_head * c.head_dim;
    KVT_TRY(grow(s.x, t * d), "allocate activations");
    KVT_TRY(grow(s.h, t * d), "allocate activations");
    KVT_TRY(grow(s.q, t * qd), "allocate activations");
    KVT_TRY(grow(s.k, t * kvd), "allocate activations");
    KVT_TRY(grow(s.v, t * kvd), "allocate activations");
    KVT_TRY(grow(s.att, t * qd), "allocate activations");
    KVT_TRY(grow(s.gate, (size_t)t * c.d_ffn), "allocate activations");
    KVT_TRY(grow(s.up, (size_t)t * c.d_ffn), "allocate activations");
    KVT_TRY(grow(s.logits, (size_t)t * c.n_vocab), "allocate logits");
    KVT_TRY(grow(s.tokens, (size_t)t), "allocate tokens");
    KVT_TRY(grow(s.positions, (size_t)t), "allocate positions");
    s.capacity_t = t;
  }
  if (n_blocks > s.capacity_blocks) {
    cudaStreamSynchronize(ctx->compute);
    KVT_TRY(grow(s.block_table, (size_t)n_blocks), "allocate block table");
    s.capacity_blocks = n_blocks;
  }
  const size_t ints = 3 * (size_t)s.capacity_t + s.capacity_blocks;
  if (ints > s.host_staging_ints) {
    cudaStreamSynchronize(ctx->compute);
    if (s.host_staging) cudaFreeHost(s.host_staging);
    s.host_staging = nullptr;
    KVT_TRY(cudaHostAlloc(reinterpret_cast<void**>(&s.host_staging), ints * sizeof(int32_t),
                          cudaHostAllocMapped),
            "pin staging");
    s.host_staging_ints = ints;
  }
  const size_t ws = kvt_cuda::attention_workspace_bytes(t, c.n_head, c.n_kv_head, c.head_dim, pos0,
                                                   ctx->sm_count);
  if (ws > s.attn_ws_bytes) {
    cudaStreamSynchronize(ctx->compute);
    cudaFree(s.attn_ws);
    s.attn_ws = nullptr;
    KVT_TRY(cudaMalloc(&s.attn_ws, ws), "allocate attention workspace");
    s.attn_ws_bytes = ws;
  }
  return KVT_CUDA_OK;
}

}  // namespace

kvt_cuda_status kvt_llama_forward(kvt_cuda_model* m, const int32_t* tokens, int t, int pos0,
                                  const int32_t* block_table, int n_blocks, float* logits,
                                  int32_t* greedy, int all_logits) {
  kvt_cuda_ctx* ctx = m->ctx;
  const kvt_llama_config& c = m->cfg;
  if (t <= 0 || pos0 < 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "forward needs t > 0 tokens and pos0 >= 0");
  if ((pos0 + t + KVT_PAGE_TOKENS - 1) / KVT_PAGE_TOKENS > n_blocks)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "block table has " + std::to_string(n_blocks) + " pages but positions up to " +
                        std::to_string(pos0 + t) + " need " +
                        std::to_string((pos0 + t + KVT_PAGE_TOKENS - 1) / KVT_PAGE_TOKENS));
  for (int i = 0; i < n_blocks; ++i)
    if (block_table[i] < 0 || block_table[i] >= ctx->kv_pages)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "block table names page " +
                                                     std::to_string(block_table[i]) + " outside the pool");
  for (int i = 0; i < t; ++i)
    if (tokens[i] < 0 || tokens[i] >= c.n_vocab)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "token id " + std::to_string(tokens[i]) +
                                                     " outside the vocabulary of " +
                                                     std::to_string(c.n_vocab));
  if (m->tok_embd < 0 || m->output_norm < 0 || m->output < 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "bind token_embd, output_norm and output weights before forward");
  for (int l = 0; l < c.n_layer; ++l) {
    const kvt_model_layer& L = m->layers[l];
    const int32_t ids[] = {L.attn_norm, L.ffn_norm, L.wq, L.wk, L.wv, L.wo, L.w_gate, L.w_up, L.w_down};
    for (int32_t id : ids)
      if (id < 0)
        return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                        "layer " + std::to_string(l) + " has unbound weights (blk." +
                            std::to_string(l) + ".*): bind every tensor before forward");
  }
  kvt_cuda_status st = ensure_scratch(m, t, n_blocks, pos0);
  if (st != KVT_CUDA_OK) return st;

  kvt_forward_scratch& s = m->scratch;
  cudaStream_t cs = ctx->compute;
  // Staging is reused by the next call; forward ends with a stream sync.
  // The SMs pull tokens and block table from mapped memory: a bulk KV import
  // occupying the H2D copy engine cannot delay the start of this forward.
  int32_t* host_tokens = s.host_staging;
  int32_t* host_positions = host_tokens + s.capacity_t;
  int32_t* host_table = host_positions + s.capacity_t;
  int32_t* host_greedy = host_table + s.capacity_blocks;
  std::copy(tokens, tokens + t, host_tokens);
  for (int i = 0; i < t; ++i) host_positions[i] = pos0 + i;
  std::copy(block_table, block_table + n_blocks, host_table);
  int32_t *dev_tokens = nullptr, *dev_positions = nullptr, *dev_table = nullptr, *dev_greedy = nullptr;
  KVT_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_tokens), host_tokens, 0), "map staging");
  KVT_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_positions), host_positions, 0), "map staging");
  KVT_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_table), host_table, 0), "map staging");
  KVT_TRY(cudaHostGetDevicePointer(reinterpret_cast<void**>(&dev_greedy), host_greedy, 0), "map staging");
  KVT_TRY(kvt_cuda::launch_copy_i32(s.tokens, dev_tokens, t, cs), "copy tokens");
  KVT_TRY(kvt_cuda::launch_copy_i32(s.positions, dev_positions, t, cs), "copy positions");
  KVT_TRY(kvt_cuda::launch_copy_i32(s.block_table, dev_table, n_blocks, cs), "copy block table");

  const auto W = [&](int32_t id) -> const kvt_cuda::DeviceWeight& { return ctx->weights[id]; };
  const auto vec = [&](int32_t id) { return static_cast<const float*>(ctx->weights[id].data); };
  kvt_cuda::PagedKv kv;
  kv.pages = static_cast<__half*>(ctx->kv_pool.ptr);
  kv.page_elems = ctx->page_bytes / sizeof(__half);
  kv.block_table = s.block_table;
  kv.n_blocks = n_blocks;
  kv.n_layers = c.n_layer;
  kv.n_kv_heads = c.n_kv_head;
  kv.head_dim = c.head_dim;
  const float scale = 1.0f / std::sqrt((float)c.head_dim);
  const size_t ffn = (size_t)t * c.d_ffn;

  KVT_TRY(kvt_cuda::launch_embed(s.x, W(m->tok_embd), s.tokens, t, cs), "embed");
  for (int l = 0; l < c.n_layer; ++l) {
    const kvt_model_layer& L = m->layers[l];
    KVT_TRY(kvt_cuda::launch_rmsnorm(s.h, s.x, vec(L.attn_norm), t, c.d_model, c.rms_eps, cs), "attn_norm");
    KVT_TRY(kvt_cuda::launch_matmul(s.q, s.h, W(L.wq), t, false, cs), "attn_q");
    KVT_TRY(kvt_cuda::launch_matmul(s.k, s.h, W(L.wk), t, false, cs), "attn_k");
    KVT_TRY(kvt_cuda::launch_matmul(s.v, s.h, W(L.wv), t, false, cs), "attn_v");
    KVT_TRY(kvt_cuda::launch_rope(s.q, s.positions, t, c.n_head, c.head_dim, c.head_dim, c.rope_base,
                                  c.rope_mode, cs),
            "rope q");
    KVT_TRY(kvt_cuda::launch_rope(s.k, s.positions, t, c.n_kv_head, c.head_dim, c.head_dim, c.rope_base,
                                  c.rope_mode, cs),
            "rope k");
    KVT_TRY(kvt_cuda::launch_kv_write(kv, s.k, s.v, l, t, pos0, cs), "kv write");
    // Cached blocks of this layer may still be crossing PCIe: wait for this
    // layer's slice of the last import only (no-op when nothing was imported).
    KVT_TRY(cudaStreamWaitEvent(cs, ctx->import_done[l], 0), "wait for KV import");
    KVT_TRY(kvt_cuda::launch_attention(s.att, s.q, kv, l, t, c.n_head, pos0, scale, s.attn_ws,
                                  s.attn_ws_bytes, ctx->sm_count, cs),
            "attention");
    KVT_TRY(kvt_cuda::launch_matmul(s.x, s.att, W(L.wo), t, true, cs), "attn_output (+residual)");
    KVT_TRY(kvt_cuda::launch_rmsnorm(s.h, s.x, vec(L.ffn_norm), t, c.d_model, c.rms_eps, cs), "ffn_norm");
    KVT_TRY(kvt_cuda::launch_matmul(s.gate, s.h, W(L.w_gate), t, false, cs), "ffn_gate");
    KVT_TRY(kvt_cuda::launch_matmul(s.up, s.h, W(L.w_up), t, false, cs), "ffn_up");
    KVT_TRY(kvt_cuda::launch_swiglu(s.gate, s.gate, s.up, ffn, cs), "swiglu");
    KVT_TRY(kvt_cuda::launch_matmul(s.x, s.gate, W(L.w_down), t, true, cs), "ffn_down (+residual)");
  }
  const int rows = all_logits ? t : 1;
  const float* last = s.x + (size_t)(t - rows) * c.d_model;
  if (logits || greedy) {
    KVT_TRY(kvt_cuda::launch_rmsnorm(s.h, last, vec(m->output_norm), rows, c.d_model, c.rms_eps, cs),
            "output_norm");
    KVT_TRY(kvt_cuda::launch_matmul(s.logits, s.h, W(m->output), rows, false, cs), "output");
    // Greedy tokens go straight to mapped host memory (no D2H copy to queue
    // behind a KV export).
    if (greedy) KVT_TRY(kvt_cuda::launch_argmax(dev_greedy, s.logits, rows, c.n_vocab, cs), "argmax");
    if (logits)
      KVT_TRY(cudaMemcpyAsync(logits, s.logits, (size_t)rows * c.n_vocab * sizeof(float),
                              cudaMemcpyDeviceToHost, cs),
              "copy logits");
  }
  KVT_TRY(cudaStreamSynchronize(cs), "forward");
  if (greedy) std::copy(host_greedy, host_greedy + rows, greedy);
  return KVT_CUDA_OK;
}
