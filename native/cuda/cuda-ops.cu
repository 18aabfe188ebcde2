// Op-level C API: device buffers and single kernel launches, every view
// checked against what the op touches before anything is enqueued.
#include <string>
#include <vector>

#include "cuda-backend-internal.h"

namespace {

kvt_cuda_status view_ptr(kvt_cuda_ctx* ctx, const kvt_cuda_view& v, size_t elems, const char* role,
                         float** out) {
  if (v.buffer < 0 || v.buffer >= (int32_t)ctx->buffers.size() || !ctx->buffers[v.buffer].ptr)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, std::string("unknown buffer for ") + role);
  const size_t cap = ctx->buffers[v.buffer].bytes / 4;
  if (v.offset > cap || v.length > cap - v.offset)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, std::string(role) + " view runs past its buffer");
  if (elems > v.length)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    std::string(role) + " holds " + std::to_string(v.length) + " elements, the op needs " +
                        std::to_string(elems));
  *out = static_cast<float*>(ctx->buffers[v.buffer].ptr) + v.offset;
  return KVT_CUDA_OK;
}

kvt_cuda_status weight(kvt_cuda_ctx* ctx, int32_t id, const kvt_cuda::DeviceWeight** out) {
  if (id < 0 || id >= (int32_t)ctx->weights.size())
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown weight id");
  *out = &ctx->weights[id];
  return KVT_CUDA_OK;
}

#define KVT_VIEW(view, elems, role, var)                                            \
  float* var = nullptr;                                                             \
  if (kvt_cuda_status st_ = view_ptr(ctx, view, elems, role, &var)) return st_

// Copies host int32 metadata to the device (stream-ordered: the next op's copy
// lands after this op's kernels have read it). Pageable sources are staged by
// CUDA before the call returns.
kvt_cuda_status upload_meta(kvt_cuda_ctx* ctx, const int32_t* src, size_t n, const int32_t** out) {
  if (n > ctx->meta_ints) {
    cudaStreamSynchronize(ctx->compute);
    cudaFree(ctx->meta);
    ctx->meta = nullptr;
    ctx->meta_ints = 0;
    const size_t cap = n < 4096 ? 4096 : n;
    if (kvt_cuda_status st = kvt_check(ctx, cudaMalloc(&ctx->meta, cap * 4), "metadata buffer")) return st;
    ctx->meta_ints = cap;
  }
  if (n)
    if (kvt_cuda_status st = kvt_check(ctx, cudaMemcpyAsync(ctx->meta, src, n * 4, cudaMemcpyHostToDevice, ctx->compute),
                                       "metadata upload"))
      return st;
  *out = ctx->meta;
  return KVT_CUDA_OK;
}

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

kvt_cuda_status check_table(kvt_cuda_ctx* ctx, const int32_t* table, int n_blocks, int covers) {
  if (!ctx->kv_pool.ptr) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "create the KV pool first");
  if (n_blocks * KVT_PAGE_TOKENS < covers)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "block table of " + std::to_string(n_blocks) + " pages cannot hold " + std::to_string(covers) +
                        " positions");
  for (int i = 0; i < n_blocks; ++i)
    if (table[i] < 0 || table[i] >= ctx->kv_pages)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                      "block table names page " + std::to_string(table[i]) + " outside the pool of " +
                          std::to_string(ctx->kv_pages));
  return KVT_CUDA_OK;
}

kvt_cuda_status ensure_attn_ws(kvt_cuda_ctx* ctx, size_t ws) {
  if (ws <= ctx->attn_ws_bytes) return KVT_CUDA_OK;
  cudaStreamSynchronize(ctx->compute);
  cudaFree(ctx->attn_ws);
  ctx->attn_ws = nullptr;
  ctx->attn_ws_bytes = 0;
  if (kvt_cuda_status st = kvt_check(ctx, cudaMalloc(&ctx->attn_ws, ws), "attention workspace")) return st;
  ctx->attn_ws_bytes = ws;
  return KVT_CUDA_OK;
}

}  // namespace

extern "C" {

kvt_cuda_status kvt_cuda_buffer_alloc(kvt_cuda_ctx* ctx, size_t bytes, int32_t* id_out) {
  void* p = nullptr;
  cudaError_t e = cudaMalloc(&p, bytes ? bytes : 4);
  if (e == cudaSuccess) e = cudaMemsetAsync(p, 0, bytes ? bytes : 4, ctx->compute);
  if (e != cudaSuccess) {
    cudaGetLastError();
    if (p) cudaFree(p);
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
  if (id < 0 || id >= (int32_t)ctx->buffers.size() || !ctx->buffers[id].ptr)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "free of an unknown buffer");
  const kvt_cuda_status st = kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "free buffer");
  cudaFree(ctx->buffers[id].ptr);
  ctx->buffers[id] = {};
  return st;
}

size_t kvt_cuda_buffer_bytes(const kvt_cuda_ctx* ctx, int32_t id) {
  return id >= 0 && id < (int32_t)ctx->buffers.size() ? ctx->buffers[id].bytes : 0;
}

static kvt_cuda_status byte_range(kvt_cuda_ctx* ctx, int32_t id, size_t offset, size_t bytes, char** out) {
  if (id < 0 || id >= (int32_t)ctx->buffers.size() || !ctx->buffers[id].ptr)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown buffer");
  if (offset > ctx->buffers[id].bytes || bytes > ctx->buffers[id].bytes - offset)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "range [" + std::to_string(offset) + ", +" + std::to_string(bytes) + ") runs past a buffer of " +
                        std::to_string(ctx->buffers[id].bytes) + " bytes");
  *out = static_cast<char*>(ctx->buffers[id].ptr) + offset;
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_buffer_write(kvt_cuda_ctx* ctx, int32_t id, size_t offset, const void* src,
                                      size_t bytes) {
  char* p = nullptr;
  if (kvt_cuda_status st = byte_range(ctx, id, offset, bytes, &p)) return st;
  kvt_cuda_status st =
      kvt_check(ctx, cudaMemcpyAsync(p, src, bytes, cudaMemcpyHostToDevice, ctx->compute), "buffer write");
  return st ? st : kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "buffer write");
}

kvt_cuda_status kvt_cuda_buffer_read(kvt_cuda_ctx* ctx, int32_t id, size_t offset, void* dst, size_t bytes) {
  char* p = nullptr;
  if (kvt_cuda_status st = byte_range(ctx, id, offset, bytes, &p)) return st;
  kvt_cuda_status st =
      kvt_check(ctx, cudaMemcpyAsync(dst, p, bytes, cudaMemcpyDeviceToHost, ctx->compute), "buffer read");
  return st ? st : kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "buffer read");
}

kvt_cuda_status kvt_cuda_op_matmul(kvt_cuda_ctx* ctx, kvt_cuda_view y, kvt_cuda_view x, int32_t w, int m,
                                   int accumulate) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, w, &dw)) return st;
  if (m <= 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "matmul needs m > 0");
  KVT_VIEW(y, (size_t)m * dw->rows, "matmul output", dy);
  KVT_VIEW(x, (size_t)m * dw->cols, "matmul input", dx);
  return kvt_check(ctx, kvt_cuda::launch_matmul(dy, dx, *dw, m, accumulate != 0, ctx->compute), "matmul");
}

kvt_cuda_status kvt_cuda_op_rmsnorm(kvt_cuda_ctx* ctx, kvt_cuda_view y, kvt_cuda_view x, int32_t gain, int rows,
                                    float eps) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, gain, &dw)) return st;
  if (dw->type != KVT_F32 || dw->rows != 1)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "rmsnorm gain must be an F32 [1][d] weight");
  if (rows <= 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "rmsnorm needs rows > 0");
  const int d = dw->cols;
  KVT_VIEW(y, (size_t)rows * d, "rmsnorm output", dy);
  KVT_VIEW(x, (size_t)rows * d, "rmsnorm input", dx);
  return kvt_check(ctx,
                   kvt_cuda::launch_rmsnorm(dy, dx, static_cast<const float*>(dw->data), rows, d, eps, ctx->compute),
                   "rmsnorm");
}

kvt_cuda_status kvt_cuda_op_rope(kvt_cuda_ctx* ctx, kvt_cuda_view x, const int32_t* positions, int rows,
                                 int heads, int hd, int rot, float base, int mode) {
  if (rows <= 0 || heads <= 0 || hd <= 0 || rot <= 0 || rot > hd || rot % 2 || rot > 2048 ||
      (mode != KVT_ROPE_NORMAL && mode != KVT_ROPE_NEOX))
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "rope: need rows, heads > 0, even rot ≤ head_dim, mode 0 or 2");
  KVT_VIEW(x, (size_t)rows * heads * hd, "rope x", dx);
  const int32_t* dpos = nullptr;
  if (kvt_cuda_status st = upload_meta(ctx, positions, rows, &dpos)) return st;
  return kvt_check(ctx, kvt_cuda::launch_rope(dx, dpos, rows, heads, hd, rot, base, mode, ctx->compute), "rope");
}

kvt_cuda_status kvt_cuda_op_swiglu(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view gate, kvt_cuda_view up,
                                   size_t n) {
  KVT_VIEW(out, n, "swiglu output", dout);
  KVT_VIEW(gate, n, "swiglu gate", dg);
  KVT_VIEW(up, n, "swiglu up", du);
  return kvt_check(ctx, kvt_cuda::launch_swiglu(dout, dg, du, n, ctx->compute), "swiglu");
}

kvt_cuda_status kvt_cuda_op_add(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view a, kvt_cuda_view b, size_t n) {
  KVT_VIEW(out, n, "add output", dout);
  KVT_VIEW(a, n, "add a", da);
  KVT_VIEW(b, n, "add b", db);
  return kvt_check(ctx, kvt_cuda::launch_add(dout, da, db, n, ctx->compute), "add");
}

kvt_cuda_status kvt_cuda_op_embed(kvt_cuda_ctx* ctx, kvt_cuda_view out, int32_t table, const int32_t* tokens,
                                  int t) {
  const kvt_cuda::DeviceWeight* dw = nullptr;
  if (kvt_cuda_status st = weight(ctx, table, &dw)) return st;
  if (t <= 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "embed needs at least one token");
  KVT_VIEW(out, (size_t)t * dw->cols, "embed output", dout);
  for (int i = 0; i < t; ++i)  // a bad id must not read outside the table
    if (tokens[i] < 0 || tokens[i] >= dw->rows)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "token id " + std::to_string(tokens[i]) + " outside the table of " +
                                                     std::to_string(dw->rows) + " rows");
  const int32_t* dtok = nullptr;
  if (kvt_cuda_status st = upload_meta(ctx, tokens, t, &dtok)) return st;
  return kvt_check(ctx, kvt_cuda::launch_embed(dout, *dw, dtok, t, ctx->compute), "embed");
}

kvt_cuda_status kvt_cuda_op_softmax(kvt_cuda_ctx* ctx, kvt_cuda_view x, int rows, int n) {
  KVT_VIEW(x, (size_t)rows * n, "softmax", dx);
  return kvt_check(ctx, kvt_cuda::launch_softmax(dx, rows, n, ctx->compute), "softmax");
}

kvt_cuda_status kvt_cuda_op_argmax(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view x, int rows, int n) {
  KVT_VIEW(out, (size_t)rows, "argmax output", dout);
  KVT_VIEW(x, (size_t)rows * n, "argmax input", dx);
  return kvt_check(ctx, kvt_cuda::launch_argmax(reinterpret_cast<int32_t*>(dout), dx, rows, n, ctx->compute),
                   "argmax");
}

kvt_cuda_status kvt_cuda_op_kv_write(kvt_cuda_ctx* ctx, int layer, const int32_t* table, int n_blocks, int pos0,
                                     int n, kvt_cuda_view k, kvt_cuda_view v) {
  if (n <= 0 || pos0 < 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "kv_write needs n > 0 and pos0 >= 0");
  if (kvt_cuda_status st = check_table(ctx, table, n_blocks, pos0 + n)) return st;
  if (layer < 0 || layer >= ctx->kv_layers) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "layer outside the pool");
  const size_t elems = (size_t)n * ctx->kv_heads * ctx->kv_head_dim;
  KVT_VIEW(k, elems, "kv_write k", dk);
  KVT_VIEW(v, elems, "kv_write v", dv);
  const int32_t* dt = nullptr;
  if (kvt_cuda_status st = upload_meta(ctx, table, n_blocks, &dt)) return st;
  return kvt_check(ctx, kvt_cuda::launch_kv_write(paged(ctx, dt, n_blocks), dk, dv, layer, n, pos0, ctx->compute),
                   "kv_write");
}

kvt_cuda_status kvt_cuda_op_attention(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view q, int layer, int heads,
                                      float scale, int n_segments, const int32_t* tables, const int32_t* table_lens,
                                      const int32_t* pos0, const int32_t* queries) {
  if (!ctx->kv_pool.ptr) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "create the KV pool first");
  if (layer < 0 || layer >= ctx->kv_layers) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "layer outside the pool");
  if (heads <= 0 || heads % ctx->kv_heads != 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "attention heads must be a positive multiple of the pool's kv heads");
  if (n_segments <= 0) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "attention needs at least one segment");
  const int hd = ctx->kv_head_dim;
  size_t total_rows = 0, total_table = 0, ws = 0;
  for (int s = 0; s < n_segments; ++s) {
    if (queries[s] <= 0 || pos0[s] < 0)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "segment " + std::to_string(s) + " needs queries > 0, pos0 >= 0");
    if (kvt_cuda_status st = check_table(ctx, tables + total_table, table_lens[s], pos0[s] + queries[s])) return st;
    total_rows += queries[s];
    total_table += table_lens[s];
    const size_t w = kvt_cuda::attention_workspace_bytes(queries[s], heads, ctx->kv_heads, hd, pos0[s], ctx->sm_count);
    ws = w > ws ? w : ws;
  }
  KVT_VIEW(out, total_rows * heads * hd, "attention output", dout);
  KVT_VIEW(q, total_rows * heads * hd, "attention q", dq);
  if (kvt_cuda_status st = ensure_attn_ws(ctx, ws)) return st;
  const int32_t* dt = nullptr;
  if (kvt_cuda_status st = upload_meta(ctx, tables, total_table, &dt)) return st;
  // Cached blocks of this layer may still be crossing PCIe.
  if (kvt_cuda_status st = kvt_check(ctx, cudaStreamWaitEvent(ctx->compute, ctx->import_done[layer], 0),
                                     "wait for KV import"))
    return st;
  size_t row = 0, tab = 0;
  for (int s = 0; s < n_segments; ++s) {
    const size_t off = row * heads * hd;
    if (kvt_cuda_status st = kvt_check(
            ctx,
            kvt_cuda::launch_attention(dout + off, dq + off, paged(ctx, dt + tab, table_lens[s]), layer, queries[s],
                                       heads, pos0[s], scale, ctx->attn_ws, ctx->attn_ws_bytes, ctx->sm_count,
                                       ctx->compute),
            "attention"))
      return st;
    row += queries[s];
    tab += table_lens[s];
  }
  return KVT_CUDA_OK;
}

}  // extern "C"
