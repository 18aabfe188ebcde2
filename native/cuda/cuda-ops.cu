// Op-level C API: device buffers and single kernel launches with size checks.
#include <string>

#include "cuda-backend-internal.h"

namespace {

kvt_cuda_status need(kvt_cuda_ctx* ctx, int32_t id, size_t bytes, const char* role, void** out) {
  if (id < 0 || id >= (int32_t)ctx->buffers.size() || !ctx->buffers[id].ptr)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, std::string("unknown buffer id for ") + role);
  if (ctx->buffers[id].bytes < bytes)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    std::string(role) + " buffer holds " + std::to_string(ctx->buffers[id].bytes) +
                        " bytes, the op needs " + std::to_string(bytes));
  *out = ctx->buffers[id].ptr;
  return KVT_CUDA_OK;
}

kvt_cuda_status weight(kvt_cuda_ctx* ctx, int32_t id, const kvt_cuda::DeviceWeight** out) {
  if (id < 0 || id >= (int32_t)ctx->weights.size())
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown weight id");
  *out = &ctx->weights[id];
  return KVT_CUDA_OK;
}

#define KVT_NEED(id, bytes, role, var)                                          \
  void* var##_raw = nullptr;                                                    \
  if (kvt_cuda_status st_ = need(ctx, id, bytes, role, &var##_raw)) return st_; \
  auto* var = static_cast<float*>(var##_raw)

kvt_cuda::PagedKv paged(kvt_cuda_ctx* ctx, const int32_t* table, int n_blocks) {
  kvt_cuda::PagedKv kv;
  kv.pages = static_cast<__half*>(ctx->kv_pool.ptr);
  kv.page_elems = ctx->page_bytes / sizeof(__half);
  kv.block_table = table;
  kv.n_blocks = n_blocks;
  kv.n_layers = ctx->kv_layers;
  kv.n_kv_heads = ctx->kv_heads;
  kv.head_dim = ctx->kv_head_dim;
  return kv;
}

}  // namespace

extern "C" {

kvt_cuda_status kvt_cuda_buffer_alloc(kvt_cuda_ctx* ctx, size_t bytes, int32_t* id_out) {
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, bytes ? bytes : 1);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return kvt_fail(ctx, KVT_CUDA_ERR_OOM,
                    "cannot allocate a " + std::to_string(bytes >> 20) + " MiB device buffer");
  }
  for (size_t i = 0; i < ctx->buffers.size(); ++i)
    if (!ctx->buffers[i].ptr) {
      ctx->buffers[i] = {p, bytes};
      *id_out = (int32_t)i;
      return KVT_CUDA_OK;
    }
  *id_out = (int32_t)ctx->buffers.size();
  ctx->buffers.push_back({p, bytes});
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_buffer_free(kvt_cuda_ctx* ctx, int32_t id) {
  void* p;
  if (kvt_cuda_status st = need(ctx, id, 0, "free", &p)) return st;
  kvt_cuda_status st = kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "free buffer");
  cudaFree(p);
  ctx->buffers[id] = {};
  return st;
}

size_t kvt_cuda_buffer_bytes(const kvt_cuda_ctx* ctx, int32_t id) {
  return id >= 0 && id < (int32_t)ctx->buffers.size() ? ctx->buffers[id].bytes : 0;
}

kvt_cuda_status kvt_cuda_buffer_write(kvt_cuda_ctx* ctx, int32_t id, size_t offset,
                                      const void* src, size_t bytes) {
  void* p;
  if (kvt_cuda_status st = need(ctx, id, offset + bytes, "write", &p)) return st;
  kvt_cuda_status st = kvt_check(
      ctx, cudaMemcpyAsync(static_cast<char*>(p) + offset, src, bytes, cudaMemcpyHostToDevice, ctx->compute),
      "buffer write");
  return st ? st : kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "buffer write");
}

kvt_cuda_status kvt_cuda_buffer_read(kvt_cuda_ctx* ctx, int32_t id, size_t offset, void* dst,
                                     size_t bytes) {
  void* p;
  if (kvt_cuda_status st = need(ctx, id, offset + bytes, "read", &p)) return st;
  kvt_cuda_status st = kvt_check(
      ctx, cudaMemcpyAsync(dst, static_cast<const char*>(p) + offset, bytes, cudaMemcpyDeviceToHost, ctx->compute),
      "buffer read");
  return st ? st : kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "buffer read");
}

kvt_cuda_status kvt_cuda_op_matmul(kvt_cuda_ctx* ctx, int32_t y, int32_t x, int32_t w, int m,
                                   int accumulate) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, w, &dw)) return st;
  if (m <= 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "matmul needs m > 0");
  KVT_NEED(y, (size_t)m * dw->rows * 4, "matmul output", dy);
  KVT_NEED(x, (size_t)m * dw->cols * 4, "matmul input", dx);
  return kvt_check(ctx, kvt_cuda::launch_matmul(dy, dx, *dw, m, accumulate != 0, ctx->compute), "matmul");
}

kvt_cuda_status kvt_cuda_op_rmsnorm(kvt_cuda_ctx* ctx, int32_t y, int32_t x, int32_t w, int t,
                                    float eps) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, w, &dw)) return st;
  if (dw->type != KVT_F32 || dw->rows != 1)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "rmsnorm gain must be an F32 [1][d] weight");
  const int d = dw->cols;
  KVT_NEED(y, (size_t)t * d * 4, "rmsnorm output", dy);
  KVT_NEED(x, (size_t)t * d * 4, "rmsnorm input", dx);
  return kvt_check(ctx, kvt_cuda::launch_rmsnorm(dy, dx, static_cast<const float*>(dw->data), t, d, eps, ctx->compute),
                   "rmsnorm");
}

kvt_cuda_status kvt_cuda_op_rope(kvt_cuda_ctx* ctx, int32_t q, int32_t k, int t, int n_head,
                                 int n_kv, int hd, int pos0, float base, int mode) {
  KVT_NEED(q, (size_t)t * n_head * hd * 4, "rope q", dq);
  KVT_NEED(k, (size_t)t * n_kv * hd * 4, "rope k", dk);
  return kvt_check(ctx, kvt_cuda::launch_rope(dq, dk, t, n_head, n_kv, hd, pos0, base, mode, ctx->compute), "rope");
}

kvt_cuda_status kvt_cuda_op_swiglu(kvt_cuda_ctx* ctx, int32_t out, int32_t gate, int32_t up, size_t n) {
  KVT_NEED(out, n * 4, "swiglu output", dout);
  KVT_NEED(gate, n * 4, "swiglu gate", dg);
  KVT_NEED(up, n * 4, "swiglu up", du);
  return kvt_check(ctx, kvt_cuda::launch_swiglu(dout, dg, du, n, ctx->compute), "swiglu");
}

kvt_cuda_status kvt_cuda_op_add(kvt_cuda_ctx* ctx, int32_t x, int32_t y, size_t n) {
  KVT_NEED(x, n * 4, "add x", dx);
  KVT_NEED(y, n * 4, "add y", dy);
  return kvt_check(ctx, kvt_cuda::launch_add(dx, dy, n, ctx->compute), "add");
}

kvt_cuda_status kvt_cuda_op_embed(kvt_cuda_ctx* ctx, int32_t out, int32_t table, int32_t tokens, int t) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, table, &dw)) return st;
  KVT_NEED(out, (size_t)t * dw->cols * 4, "embed output", dout);
  KVT_NEED(tokens, (size_t)t * 4, "embed tokens", dtok);
  // Token ids are range-checked here: a bad id must not read outside the table.
  std::vector<int32_t> ids(t > 0 ? t : 0);
  if (kvt_cuda_status st = kvt_cuda_buffer_read(ctx, tokens, 0, ids.data(), ids.size() * 4)) return st;
  for (int32_t id : ids)
    if (id < 0 || id >= dw->rows)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "token id " + std::to_string(id) + " outside the table of " +
                                                     std::to_string(dw->rows) + " rows");
  return kvt_check(ctx, kvt_cuda::launch_embed(dout, *dw, reinterpret_cast<const int32_t*>(dtok), t, ctx->compute),
                   "embed");
}

kvt_cuda_status kvt_cuda_op_softmax(kvt_cuda_ctx* ctx, int32_t x, int rows, int n) {
  KVT_NEED(x, (size_t)rows * n * 4, "softmax", dx);
  return kvt_check(ctx, kvt_cuda::launch_softmax(dx, rows, n, ctx->compute), "softmax");
}

kvt_cuda_status kvt_cuda_op_argmax(kvt_cuda_ctx* ctx, int32_t out, int32_t x, int rows, int n) {
  KVT_NEED(out, (size_t)rows * 4, "argmax output", dout);
  KVT_NEED(x, (size_t)rows * n * 4, "argmax input", dx);
  return kvt_check(ctx, kvt_cuda::launch_argmax(reinterpret_cast<int32_t*>(dout), dx, rows, n, ctx->compute), "argmax");
}

static kvt_cuda_status check_table(kvt_cuda_ctx* ctx, int32_t table, int n_blocks, const int32_t** out) {
  if (!ctx->kv_pool.ptr) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "create the KV pool first");
  KVT_NEED(table, (size_t)n_blocks * 4, "block table", dt);
  std::vector<int32_t> ids(n_blocks > 0 ? n_blocks : 0);
  if (kvt_cuda_status st = kvt_cuda_buffer_read(ctx, table, 0, ids.data(), ids.size() * 4)) return st;
  for (int32_t p : ids)
    if (p < 0 || p >= ctx->kv_pages)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "block table names page " + std::to_string(p) + " outside the pool");
  *out = reinterpret_cast<const int32_t*>(dt);
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_op_kv_write(kvt_cuda_ctx* ctx, int32_t table, int n_blocks, int32_t k,
                                     int32_t v, int layer, int t, int pos0) {
  const int32_t* dt = nullptr;
  if (kvt_cuda_status st = check_table(ctx, table, n_blocks, &dt)) return st;
  const size_t bytes = (size_t)t * ctx->kv_heads * ctx->kv_head_dim * 4;
  KVT_NEED(k, bytes, "kv_write k", dk);
  KVT_NEED(v, bytes, "kv_write v", dv);
  if (layer < 0 || layer >= ctx->kv_layers) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "layer outside the pool");
  return kvt_check(ctx, kvt_cuda::launch_kv_write(paged(ctx, dt, n_blocks), dk, dv, layer, t, pos0, ctx->compute),
                   "kv_write");
}

kvt_cuda_status kvt_cuda_op_attention(kvt_cuda_ctx* ctx, int32_t out, int32_t q, int32_t table,
                                      int n_blocks, int layer, int t, int n_head, int pos0, float scale) {
  const int32_t* dt = nullptr;
  if (kvt_cuda_status st = check_table(ctx, table, n_blocks, &dt)) return st;
  const size_t bytes = (size_t)t * n_head * ctx->kv_head_dim * 4;
  KVT_NEED(out, bytes, "attention output", dout);
  KVT_NEED(q, bytes, "attention q", dq);
  const size_t ws = kvt_cuda::attention_workspace_bytes(t, n_head, ctx->kv_heads, ctx->kv_head_dim, pos0, ctx->sm_count);
  if (ws > ctx->attn_ws_bytes) {
    cudaStreamSynchronize(ctx->compute);
    cudaFree(ctx->attn_ws);
    ctx->attn_ws = nullptr;
    ctx->attn_ws_bytes = 0;
    if (kvt_cuda_status st = kvt_check(ctx, cudaMalloc(&ctx->attn_ws, ws), "attention workspace")) return st;
    ctx->attn_ws_bytes = ws;
  }
  if (layer >= 0 && layer < ctx->kv_layers) {
    if (kvt_cuda_status st = kvt_check(ctx, cudaStreamWaitEvent(ctx->compute, ctx->import_done[layer], 0),
                                       "wait for KV import"))
      return st;
  }
  return kvt_check(ctx,
                   kvt_cuda::launch_attention(dout, dq, paged(ctx, dt, n_blocks), layer, t, n_head, pos0, scale,
                                         ctx->attn_ws, ctx->attn_ws_bytes, ctx->sm_count, ctx->compute),
                   "attention");
}

}  // extern "C"
