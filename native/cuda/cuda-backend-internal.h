// Definitions behind the opaque handles of cuda-backend.h (runtime-internal).
#pragma once
#include <map>
#include <string>
#include <vector>

#include "cuda-backend.h"
#include "kernels/kernels.cuh"

// A device allocation that is freed with its owner.
struct kvt_device_block {
  void* ptr = nullptr;
  size_t bytes = 0;
};

struct kvt_cuda_ctx {
  int device = 0;
  int sm_count = 0;
  int cc = 0;
  size_t total_bytes = 0;
  std::string device_name;
  std::string last_error;

  cudaStream_t compute = nullptr, import_stream = nullptr, export_stream = nullptr;

  // Weight arena: bump allocation inside large chunks, freed on destroy.
  std::vector<kvt_device_block> weight_chunks;
  size_t chunk_used = 0;
  size_t weight_bytes = 0;
  std::vector<kvt_cuda::DeviceWeight> weights;

  // KV page pool.
  kvt_device_block kv_pool;
  int kv_layers = 0, kv_heads = 0, kv_head_dim = 0, kv_pages = 0;
  size_t page_bytes = 0;
  std::vector<cudaEvent_t> import_done;  // per layer: that layer's slice of the last import
  cudaEvent_t compute_mark = nullptr;    // recorded at export time on the compute stream
  std::map<uint64_t, cudaEvent_t> export_tickets;
  uint64_t next_ticket = 1;

  // Op-level device buffers (cuda-ops.cu); a freed slot keeps ptr == nullptr.
  std::vector<kvt_device_block> buffers;
  void* attn_ws = nullptr;  // split-K workspace of op-level attention
  size_t attn_ws_bytes = 0;
  int32_t* meta = nullptr;  // device copy of per-op host metadata (stream-ordered reuse)
  size_t meta_ints = 0;
};

// Per-model activation scratch, grown to the largest batch seen.
struct kvt_forward_scratch {
  int capacity_t = 0;
  int capacity_blocks = 0;
  size_t attn_ws_bytes = 0;
  float *x = nullptr, *h = nullptr, *q = nullptr, *k = nullptr, *v = nullptr, *att = nullptr,
        *gate = nullptr, *up = nullptr, *logits = nullptr;
  int32_t *tokens = nullptr, *positions = nullptr, *block_table = nullptr;
  void* attn_ws = nullptr;
  // Mapped pinned host memory: tokens, positions, block table, then the greedy
  // tokens the argmax kernel writes straight back (no DMA on the hot path).
  int32_t* host_staging = nullptr;
  size_t host_staging_ints = 0;
};

struct kvt_model_layer {
  int32_t attn_norm = -1, ffn_norm = -1;
  int32_t wq = -1, wk = -1, wv = -1, wo = -1, w_gate = -1, w_up = -1, w_down = -1;
};

struct kvt_cuda_model {
  kvt_cuda_ctx* ctx = nullptr;
  kvt_llama_config cfg{};
  int32_t tok_embd = -1, output_norm = -1, output = -1;
  std::vector<kvt_model_layer> layers;
  kvt_forward_scratch scratch;
};

// Status helpers shared by the runtime files.
kvt_cuda_status kvt_fail(kvt_cuda_ctx* ctx, kvt_cuda_status status, const std::string& message);
kvt_cuda_status kvt_check(kvt_cuda_ctx* ctx, cudaError_t err, const char* what);

// The device forward pass (llama-forward.cu).
kvt_cuda_status kvt_llama_forward(kvt_cuda_model* model, const int32_t* tokens, int t, int pos0,
                                  const int32_t* block_table, int n_blocks, float* logits,
                                  int32_t* greedy, int all_logits);
void kvt_scratch_free(kvt_forward_scratch& s);
