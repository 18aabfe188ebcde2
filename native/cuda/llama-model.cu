// Model handle: binds uploaded weights to the llama graph by GGUF tensor name.
#include <cstdio>
#include <cstring>
#include <string>

#include "cuda-backend-internal.h"

namespace {

kvt_cuda_status check_shape(kvt_cuda_ctx* ctx, const std::string& name, const kvt_cuda::DeviceWeight& w,
                            int rows, int cols, bool vector) {
  if (vector && w.type != KVT_F32)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, name + " must be an F32 vector");
  if (w.rows != rows || w.cols != cols)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    name + " has shape [" + std::to_string(w.rows) + "," + std::to_string(w.cols) +
                        "], the config needs [" + std::to_string(rows) + "," +
                        std::to_string(cols) + "]");
  return KVT_CUDA_OK;
}

}  // namespace

void kvt_scratch_free(kvt_forward_scratch& s) {
  float* fs[] = {s.x, s.h, s.q, s.k, s.v, s.att, s.gate, s.up, s.logits};
  for (float* p : fs) cudaFree(p);
  cudaFree(s.tokens);
  cudaFree(s.positions);
  cudaFree(s.block_table);
  cudaFree(s.attn_ws);
  if (s.host_staging) cudaFreeHost(s.host_staging);
  s = kvt_forward_scratch{};
}

extern "C" {

kvt_cuda_status kvt_cuda_model_create(kvt_cuda_ctx* ctx, const kvt_llama_config* cfg,
                                      kvt_cuda_model** out) {
  *out = nullptr;
  const kvt_llama_config& c = *cfg;
  if (c.n_vocab <= 0 || c.d_model <= 0 || c.n_layer <= 0 || c.n_head <= 0 || c.n_kv_head <= 0 ||
      c.d_ffn <= 0 || c.n_head % c.n_kv_head != 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "model config: dimensions must be positive and n_head a multiple of n_kv_head");
  if (c.head_dim != 64 && c.head_dim != 128)
    return kvt_fail(ctx, KVT_CUDA_ERR_UNSUPPORTED,
                    "head_dim " + std::to_string(c.head_dim) +
                        " has no CUDA attention kernel (64 and 128 do): use KVTIER_DEVICE=cpu");
  if (c.d_model % 32 != 0 || c.d_ffn % 32 != 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_UNSUPPORTED, "d_model and d_ffn must be multiples of 32 on CUDA");
  if (c.rope_mode != KVT_ROPE_NORMAL && c.rope_mode != KVT_ROPE_NEOX)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "rope_mode must be 0 (normal) or 2 (neox)");
  if (!ctx->kv_pool.ptr || ctx->kv_layers != c.n_layer || ctx->kv_heads != c.n_kv_head ||
      ctx->kv_head_dim != c.head_dim)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "create the KV pool with the model's layers, kv heads and head_dim first");
  auto* m = new kvt_cuda_model();
  m->ctx = ctx;
  m->cfg = c;
  m->layers.resize(c.n_layer);
  *out = m;
  return KVT_CUDA_OK;
}

void kvt_cuda_model_destroy(kvt_cuda_model* model) {
  if (!model) return;
  cudaStreamSynchronize(model->ctx->compute);
  kvt_scratch_free(model->scratch);
  delete model;
}

void kvt_cuda_model_config(const kvt_cuda_model* model, kvt_llama_config* out) { *out = model->cfg; }

kvt_cuda_status kvt_cuda_model_bind(kvt_cuda_model* model, const char* tensor_name,
                                    int32_t weight_id) {
  kvt_cuda_ctx* ctx = model->ctx;
  const std::string name(tensor_name);
  if (weight_id < 0 || weight_id >= (int32_t)ctx->weights.size())
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown weight id for " + name);
  const kvt_cuda::DeviceWeight& w = ctx->weights[weight_id];
  const kvt_llama_config& c = model->cfg;
  const int d = c.d_model, qd = c.n_head * c.head_dim, kvd = c.n_kv_head * c.head_dim;
  if (name == "token_embd.weight") {
    kvt_cuda_status st = check_shape(ctx, name, w, c.n_vocab, d, false);
    if (st == KVT_CUDA_OK) model->tok_embd = weight_id;
    return st;
  }
  if (name == "output_norm.weight") {
    kvt_cuda_status st = check_shape(ctx, name, w, 1, d, true);
    if (st == KVT_CUDA_OK) model->output_norm = weight_id;
    return st;
  }
  if (name == "output.weight") {
    kvt_cuda_status st = check_shape(ctx, name, w, c.n_vocab, d, false);
    if (st == KVT_CUDA_OK) model->output = weight_id;
    return st;
  }
  int layer = -1, consumed = 0;
  char part[64] = {0};
  if (std::sscanf(tensor_name, "blk.%d.%63[a-z_].weight%n", &layer, part, &consumed) != 2 ||
      consumed != (int)name.size() || layer < 0 || layer >= c.n_layer)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown llama tensor name '" + name + "'");
  kvt_model_layer& L = model->layers[layer];
  const std::string p(part);
  struct Slot { const char* name; int32_t* id; int rows, cols; bool vector; };
  const Slot slots[] = {
      {"attn_norm", &L.attn_norm, 1, d, true},      {"ffn_norm", &L.ffn_norm, 1, d, true},
      {"attn_q", &L.wq, qd, d, false},              {"attn_k", &L.wk, kvd, d, false},
      {"attn_v", &L.wv, kvd, d, false},             {"attn_output", &L.wo, d, qd, false},
      {"ffn_gate", &L.w_gate, c.d_ffn, d, false},   {"ffn_up", &L.w_up, c.d_ffn, d, false},
      {"ffn_down", &L.w_down, d, c.d_ffn, false},
  };
  for (const Slot& s : slots)
    if (p == s.name) {
      kvt_cuda_status st = check_shape(ctx, name, w, s.rows, s.cols, s.vector);
      if (st == KVT_CUDA_OK) *s.id = weight_id;
      return st;
    }
  return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown llama tensor name '" + name + "'");
}

kvt_cuda_status kvt_cuda_forward(kvt_cuda_model* model, const int32_t* tokens, int t, int pos0,
                                 const int32_t* block_table, int n_blocks, float* logits,
                                 int32_t* greedy, int all_logits) {
  return kvt_llama_forward(model, tokens, t, pos0, block_table, n_blocks, logits, greedy,
                           all_logits);
}

}  // extern "C"
