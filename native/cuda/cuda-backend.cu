// Host runtime of the kvtier CUDA backend: context, weight arena, KV page
// pool and the tier path's import/export streams. See cuda-backend.h.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "cuda-backend-internal.h"
#include "q8-repack.h"

namespace {

constexpr size_t kArenaChunk = 256ull << 20;  // weight arena grows in 256 MiB chunks
constexpr size_t kAlign = 256;
constexpr int kExportRunPages = 8;

void copy_str(char* dst, size_t len, const std::string& s) {
  if (!dst || len == 0) return;
  std::snprintf(dst, len, "%s", s.c_str());
}

size_t align_up(size_t v, size_t a) { return (v + a - 1) / a * a; }

bool valid_weight_type(int t) {
  return t == KVT_F32 || t == KVT_F16 || t == KVT_BF16 || t == KVT_Q8_0;
}

size_t elem_bytes(int type) { return type == KVT_F32 ? 4 : type == KVT_Q8_0 ? 1 : 2; }

// Allocates from the weight arena; null (with last_error set) when out of memory.
void* arena_alloc(kvt_cuda_ctx* ctx, size_t bytes) {
  bytes = align_up(bytes, kAlign);
  if (ctx->weight_chunks.empty() || ctx->chunk_used + bytes > ctx->weight_chunks.back().bytes) {
    const size_t chunk = bytes > kArenaChunk ? bytes : kArenaChunk;
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, chunk);
    if (e != cudaSuccess) {
      kvt_fail(ctx, KVT_CUDA_ERR_OOM,
               "device memory exhausted allocating the weight arena (" + std::to_string(chunk >> 20) +
                   " MiB more, " + std::to_string(ctx->weight_bytes >> 20) +
                   " MiB held): use a smaller or more quantised model");
      cudaGetLastError();
      return nullptr;
    }
    ctx->weight_chunks.push_back({p, chunk});
    ctx->chunk_used = 0;
  }
  void* p = static_cast<char*>(ctx->weight_chunks.back().ptr) + ctx->chunk_used;
  ctx->chunk_used += bytes;
  ctx->weight_bytes += bytes;
  return p;
}

kvt_cuda_status check_weight_shape(kvt_cuda_ctx* ctx, int dtype, int rows, int cols) {
  if (!valid_weight_type(dtype))
    return kvt_fail(ctx, KVT_CUDA_ERR_UNSUPPORTED,
                    "weight dtype " + std::to_string(dtype) +
                        " is not supported on CUDA: use F32 (0), F16 (1), Q8_0 (8) or BF16 (30)");
  if (rows <= 0 || cols <= 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "weight shape must be positive");
  if (dtype != KVT_F32 && cols % 32 != 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                    "weight columns (" + std::to_string(cols) +
                        ") must be a multiple of 32 for F16/BF16/Q8_0 on CUDA");
  if (dtype == KVT_F32 && cols % 8 != 0 && rows != 1)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "F32 matrix columns must be a multiple of 8");
  return KVT_CUDA_OK;
}

kvt_cuda_status new_weight(kvt_cuda_ctx* ctx, int dtype, int rows, int cols,
                           kvt_cuda::DeviceWeight* out) {
  const size_t n = (size_t)rows * cols;
  void* data = arena_alloc(ctx, n * elem_bytes(dtype));
  if (!data) return KVT_CUDA_ERR_OOM;
  __half* scales = nullptr;
  if (dtype == KVT_Q8_0) {
    scales = static_cast<__half*>(arena_alloc(ctx, n / 32 * sizeof(__half)));
    if (!scales) return KVT_CUDA_ERR_OOM;
  }
  *out = {dtype, rows, cols, data, scales};
  return KVT_CUDA_OK;
}

}  // namespace

kvt_cuda_status kvt_fail(kvt_cuda_ctx* ctx, kvt_cuda_status status, const std::string& message) {
  if (ctx) ctx->last_error = message;
  return status;
}

kvt_cuda_status kvt_check(kvt_cuda_ctx* ctx, cudaError_t err, const char* what) {
  if (err == cudaSuccess) return KVT_CUDA_OK;
  cudaGetLastError();  // clear a sticky launch error so the next call reports its own
  const kvt_cuda_status st =
      err == cudaErrorMemoryAllocation ? KVT_CUDA_ERR_OOM
      : err == cudaErrorInvalidValue   ? KVT_CUDA_ERR_INVALID
                                       : KVT_CUDA_ERR_RUNTIME;
  return kvt_fail(ctx, st, std::string(what) + ": " + cudaGetErrorName(err) + " (" +
                               cudaGetErrorString(err) + ")");
}

extern "C" {

int kvt_cuda_device_count(char* reason, size_t reason_len) {
  int n = 0;
  const cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess) {
    copy_str(reason, reason_len, std::string("no usable CUDA device: ") + cudaGetErrorString(e));
    cudaGetLastError();
    return 0;
  }
  if (n == 0) copy_str(reason, reason_len, "no usable CUDA device: the driver reports none");
  return n;
}

kvt_cuda_status kvt_cuda_create(int device, kvt_cuda_ctx** out, char* err, size_t err_len) {
  *out = nullptr;
  char reason[256];
  const int n = kvt_cuda_device_count(reason, sizeof reason);
  if (n == 0) {
    copy_str(err, err_len, reason);
    return KVT_CUDA_ERR_NO_DEVICE;
  }
  if (device < 0 || device >= n) {
    copy_str(err, err_len, "CUDA device " + std::to_string(device) + " does not exist (" +
                               std::to_string(n) + " present)");
    return KVT_CUDA_ERR_NO_DEVICE;
  }
  cudaDeviceProp prop;
  cudaError_t e = cudaSetDevice(device);
  if (e == cudaSuccess) e = cudaGetDeviceProperties(&prop, device);
  if (e != cudaSuccess) {
    copy_str(err, err_len, std::string("cannot open CUDA device: ") + cudaGetErrorString(e));
    return KVT_CUDA_ERR_RUNTIME;
  }
  if (prop.major < 8) {
    copy_str(err, err_len, std::string("CUDA device ") + prop.name + " is sm_" +
                               std::to_string(prop.major * 10 + prop.minor) +
                               "; kvtier's kernels need sm_80 or newer (Ampere+)");
    return KVT_CUDA_ERR_UNSUPPORTED;
  }
  auto* ctx = new kvt_cuda_ctx();
  ctx->device = device;
  ctx->sm_count = prop.multiProcessorCount;
  ctx->cc = prop.major * 10 + prop.minor;
  ctx->total_bytes = prop.totalGlobalMem;
  ctx->device_name = prop.name;
  e = cudaStreamCreateWithFlags(&ctx->compute, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&ctx->import_stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaStreamCreateWithFlags(&ctx->export_stream, cudaStreamNonBlocking);
  if (e == cudaSuccess) e = cudaEventCreateWithFlags(&ctx->compute_mark, cudaEventDisableTiming);
  if (e != cudaSuccess) {
    copy_str(err, err_len, std::string("cannot create CUDA streams: ") + cudaGetErrorString(e));
    kvt_cuda_destroy(ctx);
    return KVT_CUDA_ERR_RUNTIME;
  }
  *out = ctx;
  return KVT_CUDA_OK;
}

void kvt_cuda_destroy(kvt_cuda_ctx* ctx) {
  if (!ctx) return;
  cudaSetDevice(ctx->device);
  cudaDeviceSynchronize();
  for (auto& c : ctx->weight_chunks) cudaFree(c.ptr);
  if (ctx->kv_pool.ptr) cudaFree(ctx->kv_pool.ptr);
  for (auto& b : ctx->buffers) cudaFree(b.ptr);
  cudaFree(ctx->attn_ws);
  cudaFree(ctx->meta);
  for (cudaEvent_t ev : ctx->import_done) cudaEventDestroy(ev);
  for (auto& kv : ctx->export_tickets) cudaEventDestroy(kv.second);
  if (ctx->compute_mark) cudaEventDestroy(ctx->compute_mark);
  if (ctx->compute) cudaStreamDestroy(ctx->compute);
  if (ctx->import_stream) cudaStreamDestroy(ctx->import_stream);
  if (ctx->export_stream) cudaStreamDestroy(ctx->export_stream);
  delete ctx;
}

const char* kvt_cuda_last_error(const kvt_cuda_ctx* ctx) {
  return ctx ? ctx->last_error.c_str() : "no CUDA context";
}

kvt_cuda_status kvt_cuda_device_info(kvt_cuda_ctx* ctx, char* name, size_t name_len,
                                     int* sm_count, size_t* total_bytes, int* cc) {
  copy_str(name, name_len, ctx->device_name);
  if (sm_count) *sm_count = ctx->sm_count;
  if (total_bytes) *total_bytes = ctx->total_bytes;
  if (cc) *cc = ctx->cc;
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_synchronize(kvt_cuda_ctx* ctx) {
  kvt_cuda_status st = kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "compute stream");
  if (st == KVT_CUDA_OK) st = kvt_check(ctx, cudaStreamSynchronize(ctx->import_stream), "import stream");
  if (st == KVT_CUDA_OK) st = kvt_check(ctx, cudaStreamSynchronize(ctx->export_stream), "export stream");
  return st;
}

kvt_cuda_status kvt_cuda_host_alloc(kvt_cuda_ctx* ctx, size_t bytes, void** out) {
  *out = nullptr;
  const cudaError_t e = cudaMallocHost(out, bytes);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return kvt_fail(ctx, KVT_CUDA_ERR_OOM,
                    "cannot pin " + std::to_string(bytes >> 20) +
                        " MiB of host memory: lower the staging size or raise the locked-memory limit");
  }
  return KVT_CUDA_OK;
}

void kvt_cuda_host_free(kvt_cuda_ctx*, void* ptr) {
  if (ptr) cudaFreeHost(ptr);
}

kvt_cuda_status kvt_cuda_weight_upload(kvt_cuda_ctx* ctx, int dtype, int rows, int cols,
                                       const void* host, int32_t* id_out) {
  kvt_cuda_status st = check_weight_shape(ctx, dtype, rows, cols);
  if (st != KVT_CUDA_OK) return st;
  kvt_cuda::DeviceWeight w;
  if ((st = new_weight(ctx, dtype, rows, cols, &w)) != KVT_CUDA_OK) return st;
  const size_t n = (size_t)rows * cols;
  if (dtype == KVT_Q8_0) {
    std::vector<int8_t> qs(n);
    std::vector<uint16_t> scales(n / 32);
    kvt_cuda::q8_0_repack(qs.data(), scales.data(), static_cast<const kvt_block_q8_0*>(host), rows, cols);
    st = kvt_check(ctx, cudaMemcpy(const_cast<void*>(w.data), qs.data(), n, cudaMemcpyHostToDevice),
                   "upload Q8_0 weight");
    if (st == KVT_CUDA_OK)
      st = kvt_check(ctx, cudaMemcpy(const_cast<__half*>(w.scales), scales.data(), n / 32 * 2,
                                     cudaMemcpyHostToDevice),
                     "upload Q8_0 scales");
  } else {
    st = kvt_check(ctx, cudaMemcpy(const_cast<void*>(w.data), host, n * elem_bytes(dtype),
                                   cudaMemcpyHostToDevice),
                   "upload weight");
  }
  if (st != KVT_CUDA_OK) return st;
  *id_out = (int32_t)ctx->weights.size();
  ctx->weights.push_back(w);
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_weight_random(kvt_cuda_ctx* ctx, int dtype, int rows, int cols,
                                       uint64_t seed, float scale, int32_t* id_out) {
  kvt_cuda_status st = check_weight_shape(ctx, dtype, rows, cols);
  if (st != KVT_CUDA_OK) return st;
  kvt_cuda::DeviceWeight w;
  if ((st = new_weight(ctx, dtype, rows, cols, &w)) != KVT_CUDA_OK) return st;
  st = kvt_check(ctx, kvt_cuda::launch_fill_random(w, seed, scale, ctx->compute), "fill random weight");
  if (st == KVT_CUDA_OK) st = kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "fill random weight");
  if (st != KVT_CUDA_OK) return st;
  *id_out = (int32_t)ctx->weights.size();
  ctx->weights.push_back(w);
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_weight_const(kvt_cuda_ctx* ctx, int n, float value, int32_t* id_out) {
  kvt_cuda_status st = check_weight_shape(ctx, KVT_F32, 1, n);
  if (st != KVT_CUDA_OK) return st;
  kvt_cuda::DeviceWeight w;
  if ((st = new_weight(ctx, KVT_F32, 1, n, &w)) != KVT_CUDA_OK) return st;
  st = kvt_check(ctx, kvt_cuda::launch_fill_f32(static_cast<float*>(const_cast<void*>(w.data)), n, value,
                                           ctx->compute),
                 "fill constant weight");
  if (st == KVT_CUDA_OK) st = kvt_check(ctx, cudaStreamSynchronize(ctx->compute), "fill constant");
  if (st != KVT_CUDA_OK) return st;
  *id_out = (int32_t)ctx->weights.size();
  ctx->weights.push_back(w);
  return KVT_CUDA_OK;
}

size_t kvt_cuda_weight_bytes(const kvt_cuda_ctx* ctx) { return ctx->weight_bytes; }

kvt_cuda_status kvt_cuda_kv_pool_create(kvt_cuda_ctx* ctx, int n_layers, int n_kv_heads,
                                        int head_dim, int n_pages) {
  if (ctx->kv_pool.ptr)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "this context already has a KV pool");
  if (n_layers <= 0 || n_kv_heads <= 0 || n_pages <= 0)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "KV pool dimensions must be positive");
  if (head_dim != 64 && head_dim != 128)
    return kvt_fail(ctx, KVT_CUDA_ERR_UNSUPPORTED,
                    "head_dim " + std::to_string(head_dim) +
                        " has no CUDA attention kernel (64 and 128 do): use the CPU backend");
  const size_t page_bytes = (size_t)n_layers * 2 * n_kv_heads * KVT_PAGE_TOKENS * head_dim * 2;
  void* p = nullptr;
  const cudaError_t e = cudaMalloc(&p, page_bytes * n_pages);
  if (e != cudaSuccess) {
    cudaGetLastError();
    return kvt_fail(ctx, KVT_CUDA_ERR_OOM,
                    "cannot allocate " + std::to_string(n_pages) + " KV pages (" +
                        std::to_string((page_bytes * n_pages) >> 20) + " MiB): use fewer pages");
  }
  ctx->kv_pool = {p, page_bytes * n_pages};
  ctx->kv_layers = n_layers;
  ctx->kv_heads = n_kv_heads;
  ctx->kv_head_dim = head_dim;
  ctx->kv_pages = n_pages;
  ctx->page_bytes = page_bytes;
  ctx->import_done.resize(n_layers);
  for (auto& ev : ctx->import_done) {
    kvt_cuda_status st = kvt_check(ctx, cudaEventCreateWithFlags(&ev, cudaEventDisableTiming),
                                   "create import event");
    if (st != KVT_CUDA_OK) return st;
  }
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_kv_pool_free(kvt_cuda_ctx* ctx) {
  if (!ctx->kv_pool.ptr) return KVT_CUDA_OK;
  kvt_cuda_status st = kvt_cuda_synchronize(ctx);
  cudaFree(ctx->kv_pool.ptr);
  for (cudaEvent_t ev : ctx->import_done) cudaEventDestroy(ev);
  ctx->import_done.clear();
  ctx->kv_pool = {};
  ctx->kv_layers = ctx->kv_heads = ctx->kv_head_dim = ctx->kv_pages = 0;
  ctx->page_bytes = 0;
  return st;
}

size_t kvt_cuda_kv_page_bytes(const kvt_cuda_ctx* ctx) { return ctx->page_bytes; }
int kvt_cuda_kv_page_count(const kvt_cuda_ctx* ctx) { return ctx->kv_pages; }

static kvt_cuda_status check_pages(kvt_cuda_ctx* ctx, const int32_t* page_ids, int n) {
  if (!ctx->kv_pool.ptr) return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "create the KV pool first");
  for (int i = 0; i < n; ++i)
    if (page_ids[i] < 0 || page_ids[i] >= ctx->kv_pages)
      return kvt_fail(ctx, KVT_CUDA_ERR_INVALID,
                      "page id " + std::to_string(page_ids[i]) + " outside the pool of " +
                          std::to_string(ctx->kv_pages) + " pages");
  return KVT_CUDA_OK;
}

// Layer-major: all blocks' layer-0 slices first, so the compute stream can
// start layer 0's attention while later layers are still in flight. Runs of
// consecutive page ids become one strided 2-D copy per layer.
kvt_cuda_status kvt_cuda_kv_import(kvt_cuda_ctx* ctx, const int32_t* page_ids, int n,
                                   const void* host_src, size_t src_stride) {
  kvt_cuda_status st = check_pages(ctx, page_ids, n);
  if (st != KVT_CUDA_OK) return st;
  if (src_stride < ctx->page_bytes)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "import stride is smaller than one KV page");
  const size_t layer_bytes = ctx->page_bytes / ctx->kv_layers;
  char* pool = static_cast<char*>(ctx->kv_pool.ptr);
  const char* src = static_cast<const char*>(host_src);
  for (int l = 0; l < ctx->kv_layers; ++l) {
    for (int i = 0; i < n;) {
      int run = 1;
      while (i + run < n && page_ids[i + run] == page_ids[i] + run) ++run;
      st = kvt_check(ctx,
                     cudaMemcpy2DAsync(pool + (size_t)page_ids[i] * ctx->page_bytes + l * layer_bytes,
                                       ctx->page_bytes, src + (size_t)i * src_stride + l * layer_bytes,
                                       src_stride, layer_bytes, run, cudaMemcpyHostToDevice,
                                       ctx->import_stream),
                     "enqueue KV import");
      if (st != KVT_CUDA_OK) return st;
      i += run;
    }
    st = kvt_check(ctx, cudaEventRecord(ctx->import_done[l], ctx->import_stream), "record import");
    if (st != KVT_CUDA_OK) return st;
  }
  return KVT_CUDA_OK;
}

kvt_cuda_status kvt_cuda_kv_import_wait(kvt_cuda_ctx* ctx) {
  return kvt_check(ctx, cudaStreamSynchronize(ctx->import_stream), "KV import");
}

kvt_cuda_status kvt_cuda_kv_export(kvt_cuda_ctx* ctx, const int32_t* page_ids, int n,
                                   void* host_dst, size_t dst_stride, uint64_t* ticket) {
  kvt_cuda_status st = check_pages(ctx, page_ids, n);
  if (st != KVT_CUDA_OK) return st;
  if (dst_stride < ctx->page_bytes)
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "export stride is smaller than one KV page");
  st = kvt_check(ctx, cudaEventRecord(ctx->compute_mark, ctx->compute), "record compute mark");
  if (st == KVT_CUDA_OK)
    st = kvt_check(ctx, cudaStreamWaitEvent(ctx->export_stream, ctx->compute_mark, 0), "order export");
  // ...and after imports already enqueued (a page imported then exported must
  // export the imported bytes). The last layer's event closes each import.
  if (st == KVT_CUDA_OK)
    st = kvt_check(ctx, cudaStreamWaitEvent(ctx->export_stream, ctx->import_done.back(), 0), "order export");
  if (st != KVT_CUDA_OK) return st;
  const char* pool = static_cast<const char*>(ctx->kv_pool.ptr);
  char* dst = static_cast<char*>(host_dst);
  for (int i = 0; i < n;) {
    // Bounded copies (≤ kExportRunPages pages) so other D2H traffic can
    // interleave between them instead of queueing behind one huge copy.
    int run = 1;
    while (i + run < n && run < kExportRunPages && page_ids[i + run] == page_ids[i] + run) ++run;
    st = kvt_check(ctx,
                   cudaMemcpy2DAsync(dst + (size_t)i * dst_stride, dst_stride,
                                     pool + (size_t)page_ids[i] * ctx->page_bytes, ctx->page_bytes,
                                     ctx->page_bytes, run, cudaMemcpyDeviceToHost, ctx->export_stream),
                   "enqueue KV export");
    if (st != KVT_CUDA_OK) return st;
    i += run;
  }
  cudaEvent_t done;
  st = kvt_check(ctx, cudaEventCreateWithFlags(&done, cudaEventDisableTiming), "create export event");
  if (st != KVT_CUDA_OK) return st;
  st = kvt_check(ctx, cudaEventRecord(done, ctx->export_stream), "record export");
  if (st != KVT_CUDA_OK) {
    cudaEventDestroy(done);
    return st;
  }
  *ticket = ctx->next_ticket++;
  ctx->export_tickets[*ticket] = done;
  return KVT_CUDA_OK;
}

int kvt_cuda_kv_export_poll(kvt_cuda_ctx* ctx, uint64_t ticket) {
  auto it = ctx->export_tickets.find(ticket);
  if (it == ctx->export_tickets.end())
    return -(int)kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown or already completed export ticket");
  const cudaError_t e = cudaEventQuery(it->second);
  if (e == cudaErrorNotReady) return 0;
  cudaEventDestroy(it->second);
  ctx->export_tickets.erase(it);
  if (e != cudaSuccess) return -(int)kvt_check(ctx, e, "KV export");
  return 1;
}

kvt_cuda_status kvt_cuda_kv_export_wait(kvt_cuda_ctx* ctx, uint64_t ticket) {
  auto it = ctx->export_tickets.find(ticket);
  if (it == ctx->export_tickets.end())
    return kvt_fail(ctx, KVT_CUDA_ERR_INVALID, "unknown or already completed export ticket");
  const cudaError_t e = cudaEventSynchronize(it->second);
  cudaEventDestroy(it->second);
  ctx->export_tickets.erase(it);
  return kvt_check(ctx, e, "KV export");
}

kvt_cuda_status kvt_cuda_kv_page_read(kvt_cuda_ctx* ctx, int32_t page, void* host_dst) {
  kvt_cuda_status st = check_pages(ctx, &page, 1);
  if (st != KVT_CUDA_OK) return st;
  st = kvt_cuda_synchronize(ctx);
  if (st != KVT_CUDA_OK) return st;
  return kvt_check(ctx,
                   cudaMemcpy(host_dst, static_cast<const char*>(ctx->kv_pool.ptr) + (size_t)page * ctx->page_bytes,
                              ctx->page_bytes, cudaMemcpyDeviceToHost),
                   "page read");
}

}  // extern "C"
