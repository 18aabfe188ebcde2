/* kvtier CUDA backend — the C API the N-API layer and the standalone driver call.
 *
 * Device memory is split into three owners:
 *   - the weight arena: every weight is uploaded (or generated) once and
 *     lives until kvt_cuda_destroy;
 *   - the KV page pool: n_pages pages of
 *       page[layer][K|V][kv_head][64 tokens][head_dim]  (f16)
 *     exactly the KV payload of one kvtier block, so a cached block moves
 *     between host and device as one contiguous copy;
 *   - activation scratch: per model, grown to the largest batch seen.
 *
 * Three streams:
 *
 *     import  ── H2D page copies (layer-major) ─ev[0]─ev[1]─ … ─ev[L-1]
 *                                                 │      │
 *     compute ── embed, layer 0 …  wait ev[0] → attn0 … wait ev[1] → attn1 …
 *                        │ mark
 *     export  ────────── wait mark → D2H page copies → ticket event
 *
 *   an import of cached blocks overlaps the prefill of the uncached suffix
 *   (layer l's attention waits only for layer l's slice of the import);
 *   an export waits only for the compute already enqueued when it is called,
 *   so decoding that is enqueued afterwards never waits for it.
 *
 * Every call returns a kvt_cuda_status; on failure kvt_cuda_last_error(ctx)
 * says what went wrong and what to do. No call synchronises the device
 * except where documented.
 */
#ifndef KVT_CUDA_BACKEND_H
#define KVT_CUDA_BACKEND_H
#include <stddef.h>
#include <stdint.h>

#include "kvt-cuda-types.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum kvt_cuda_status {
  KVT_CUDA_OK = 0,
  KVT_CUDA_ERR_NO_DEVICE = 1,   /* no driver / no device / device index out of range */
  KVT_CUDA_ERR_INVALID = 2,     /* bad argument: shape, id, dtype, range */
  KVT_CUDA_ERR_OOM = 3,         /* device or pinned allocation failed */
  KVT_CUDA_ERR_UNSUPPORTED = 4, /* valid request this backend does not implement */
  KVT_CUDA_ERR_RUNTIME = 5      /* a CUDA runtime call failed (message has the CUDA error) */
} kvt_cuda_status;

typedef struct kvt_cuda_ctx kvt_cuda_ctx;
typedef struct kvt_cuda_model kvt_cuda_model;

/* Number of usable CUDA devices; when 0, `reason` (if given) says why
 * (e.g. "CUDA driver version is insufficient for CUDA runtime version"). */
int kvt_cuda_device_count(char* reason, size_t reason_len);

kvt_cuda_status kvt_cuda_create(int device, kvt_cuda_ctx** out, char* err, size_t err_len);
void kvt_cuda_destroy(kvt_cuda_ctx* ctx);
const char* kvt_cuda_last_error(const kvt_cuda_ctx* ctx);
/* name: device name; sm_count; total_bytes: device memory; cc: compute capability*10 */
kvt_cuda_status kvt_cuda_device_info(kvt_cuda_ctx* ctx, char* name, size_t name_len,
                                     int* sm_count, size_t* total_bytes, int* cc);
/* Waits for all three streams. */
kvt_cuda_status kvt_cuda_synchronize(kvt_cuda_ctx* ctx);

/* Pinned (page-locked) host memory: the staging buffers of the tier path. */
kvt_cuda_status kvt_cuda_host_alloc(kvt_cuda_ctx* ctx, size_t bytes, void** out);
void kvt_cuda_host_free(kvt_cuda_ctx* ctx, void* ptr);

/* ---- weights (arena; uploaded once) ---------------------------------- */
/* host: the tensor in its GGUF layout ([rows][cols] of F32/F16/BF16, or
 * packed 34-byte Q8_0 blocks); cols % 32 == 0 except for F32 vectors. */
kvt_cuda_status kvt_cuda_weight_upload(kvt_cuda_ctx* ctx, int dtype, int rows, int cols,
                                       const void* host, int32_t* id_out);
/* Deterministic uniform [-scale, scale] weights generated on the device. */
kvt_cuda_status kvt_cuda_weight_random(kvt_cuda_ctx* ctx, int dtype, int rows, int cols,
                                       uint64_t seed, float scale, int32_t* id_out);
/* An F32 [1][n] weight filled with `value` (norm gains of benchmark models). */
kvt_cuda_status kvt_cuda_weight_const(kvt_cuda_ctx* ctx, int n, float value, int32_t* id_out);
/* Bytes held by the weight arena. */
size_t kvt_cuda_weight_bytes(const kvt_cuda_ctx* ctx);

/* ---- KV page pool ----------------------------------------------------- */
/* One pool per context; head_dim 64 or 128; KV stored as f16. */
kvt_cuda_status kvt_cuda_kv_pool_create(kvt_cuda_ctx* ctx, int n_layers, int n_kv_heads,
                                        int head_dim, int n_pages);
size_t kvt_cuda_kv_page_bytes(const kvt_cuda_ctx* ctx);
int kvt_cuda_kv_page_count(const kvt_cuda_ctx* ctx);

/* Import n cached blocks: block i (host_src + i*src_stride, page_bytes long)
 * → page page_ids[i]. Enqueued on the import stream; returns at once.
 * host_src must stay valid (and should be pinned) until kvt_cuda_kv_import_wait;
 * the target pages must not be in use by compute already enqueued. */
kvt_cuda_status kvt_cuda_kv_import(kvt_cuda_ctx* ctx, const int32_t* page_ids, int n,
                                   const void* host_src, size_t src_stride);
kvt_cuda_status kvt_cuda_kv_import_wait(kvt_cuda_ctx* ctx);

/* Export n pages (after all compute and imports enqueued so far) into host_dst + i*dst_stride
 * on the export stream; *ticket identifies the copy. The pages must not be
 * rewritten until the ticket completes. */
kvt_cuda_status kvt_cuda_kv_export(kvt_cuda_ctx* ctx, const int32_t* page_ids, int n,
                                   void* host_dst, size_t dst_stride, uint64_t* ticket);
/* 1 when done (ticket released), 0 while in flight; KVT_CUDA_ERR_* negated on error. */
int kvt_cuda_kv_export_poll(kvt_cuda_ctx* ctx, uint64_t ticket);
kvt_cuda_status kvt_cuda_kv_export_wait(kvt_cuda_ctx* ctx, uint64_t ticket);
/* Raw page access (tests, debugging): synchronous copies of one page. */
kvt_cuda_status kvt_cuda_kv_page_read(kvt_cuda_ctx* ctx, int32_t page, void* host_dst);

/* ---- model ------------------------------------------------------------ */
kvt_cuda_status kvt_cuda_model_create(kvt_cuda_ctx* ctx, const kvt_llama_config* cfg,
                                      kvt_cuda_model** out);
void kvt_cuda_model_destroy(kvt_cuda_model* model);
void kvt_cuda_model_config(const kvt_cuda_model* model, kvt_llama_config* out);
/* Binds a weight to a GGUF tensor name: token_embd.weight, output_norm.weight,
 * output.weight, blk.N.{attn_norm,attn_q,attn_k,attn_v,attn_output,ffn_norm,
 * ffn_gate,ffn_up,ffn_down}.weight. Shapes are checked here. */
kvt_cuda_status kvt_cuda_model_bind(kvt_cuda_model* model, const char* tensor_name,
                                    int32_t weight_id);

/* Runs tokens[0..t) at positions pos0.. of one sequence whose KV pages are
 * block_table[0..n_blocks) (covering pos0+t positions): writes their K/V into
 * the pages, and returns
 *   logits  (nullable): [t][n_vocab] when all_logits, else [1][n_vocab] (last token)
 *   greedy  (nullable): argmax token of the same rows.
 * Synchronises the compute stream (not import/export) before returning. */
kvt_cuda_status kvt_cuda_forward(kvt_cuda_model* model, const int32_t* tokens, int t, int pos0,
                                 const int32_t* block_table, int n_blocks, float* logits,
                                 int32_t* greedy, int all_logits);

/* ---- op level: device buffers and single kernels ----------------------
 * For an engine that drives the graph itself (native/backend.ts). Buffers
 * hold f32 activations (int32 for argmax output); ops address them through
 * views (buffer, offset, length in 4-byte elements), are enqueued on the
 * compute stream, and check every view against what the op touches. Small
 * host metadata (tokens, positions, block tables) is uploaded per call.
 * Shapes as in kernels/kernels.cuh. */
typedef struct kvt_cuda_view {
  int32_t buffer;
  uint64_t offset; /* elements */
  uint64_t length; /* elements */
} kvt_cuda_view;

/* Zero-filled. */
kvt_cuda_status kvt_cuda_buffer_alloc(kvt_cuda_ctx* ctx, size_t bytes, int32_t* id_out);
kvt_cuda_status kvt_cuda_buffer_free(kvt_cuda_ctx* ctx, int32_t id);
/* Synchronous with respect to the compute stream (a read waits for pending ops). */
kvt_cuda_status kvt_cuda_buffer_write(kvt_cuda_ctx* ctx, int32_t id, size_t offset_bytes,
                                      const void* src, size_t bytes);
kvt_cuda_status kvt_cuda_buffer_read(kvt_cuda_ctx* ctx, int32_t id, size_t offset_bytes,
                                     void* dst, size_t bytes);
size_t kvt_cuda_buffer_bytes(const kvt_cuda_ctx* ctx, int32_t id); /* 0 for an unknown id */

/* y[m][w.rows] (=|+=) x[m][w.cols] · wᵀ */
kvt_cuda_status kvt_cuda_op_matmul(kvt_cuda_ctx* ctx, kvt_cuda_view y, kvt_cuda_view x,
                                   int32_t weight, int m, int accumulate);
/* y[rows][d] = x · rsqrt(mean(x²)+eps) · gain   (gain: F32 [1][d] weight) */
kvt_cuda_status kvt_cuda_op_rmsnorm(kvt_cuda_ctx* ctx, kvt_cuda_view y, kvt_cuda_view x,
                                    int32_t gain, int rows, float eps);
/* In place on x[rows][heads][head_dim]; positions[rows] (host); rot = rotated dims. */
kvt_cuda_status kvt_cuda_op_rope(kvt_cuda_ctx* ctx, kvt_cuda_view x, const int32_t* positions,
                                 int rows, int heads, int head_dim, int rot, float base, int mode);
kvt_cuda_status kvt_cuda_op_swiglu(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view gate,
                                   kvt_cuda_view up, size_t n);
kvt_cuda_status kvt_cuda_op_add(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view a,
                                kvt_cuda_view b, size_t n);
/* out[t][table.cols] = rows tokens[0..t) (host) of the table weight. */
kvt_cuda_status kvt_cuda_op_embed(kvt_cuda_ctx* ctx, kvt_cuda_view out, int32_t table,
                                  const int32_t* tokens, int t);
kvt_cuda_status kvt_cuda_op_softmax(kvt_cuda_ctx* ctx, kvt_cuda_view x, int rows, int n);
kvt_cuda_status kvt_cuda_op_argmax(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view x,
                                   int rows, int n);
/* K/V rows k,v [n][kv_heads][head_dim] → the pool's pages at positions
 * [pos0, pos0+n) of the sequence with block_table (host, n_blocks pages). */
kvt_cuda_status kvt_cuda_op_kv_write(kvt_cuda_ctx* ctx, int layer, const int32_t* block_table,
                                     int n_blocks, int pos0, int n, kvt_cuda_view k,
                                     kvt_cuda_view v);
/* Causal GQA attention of n_segments query runs, rows in segment order:
 * segment s has queries[s] queries at positions pos0[s].., and block table
 * tables[table_start(s) .. + table_lens[s]) (host arrays, tables concatenated). */
kvt_cuda_status kvt_cuda_op_attention(kvt_cuda_ctx* ctx, kvt_cuda_view out, kvt_cuda_view q,
                                      int layer, int heads, float scale, int n_segments,
                                      const int32_t* tables, const int32_t* table_lens,
                                      const int32_t* pos0, const int32_t* queries);
/* Releases the KV pool (waits for every stream); a new one may be created. */
kvt_cuda_status kvt_cuda_kv_pool_free(kvt_cuda_ctx* ctx);

#ifdef __cplusplus
}
#endif
#endif
