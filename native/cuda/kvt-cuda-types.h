/* Plain C types shared by the CUDA kernels, the host runtime, the CPU
 * reference and the N-API binding. No CUDA headers here: this file is also
 * compiled by g++ / node-gyp. */
#ifndef KVT_CUDA_TYPES_H
#define KVT_CUDA_TYPES_H
#include <stddef.h>
#include <stdint.h>

/* Tokens per KV page / kvtier block. */
#define KVT_PAGE_TOKENS 64

/* Element types; the values are the GGML type ids so a GGUF tensor's type
 * can be passed straight through. */
typedef enum kvt_dtype {
  KVT_F32 = 0,
  KVT_F16 = 1,
  KVT_Q8_0 = 8,
  KVT_BF16 = 30
} kvt_dtype;

typedef enum kvt_rope_mode {
  KVT_ROPE_NORMAL = 0, /* rotate adjacent pairs (x[2i], x[2i+1]) — llama in GGUF */
  KVT_ROPE_NEOX = 2    /* rotate halves (x[i], x[i+d/2]) — NeoX / HF order */
} kvt_rope_mode;

/* ggml's Q8_0 block: 32 int8 values and one f16 scale (34 bytes, packed). */
typedef struct kvt_block_q8_0 {
  uint16_t d_bits; /* f16 scale, raw bits */
  int8_t qs[32];
} kvt_block_q8_0;

/* A llama-family model's shape. */
typedef struct kvt_llama_config {
  int n_vocab;
  int d_model;
  int n_layer;
  int n_head;
  int n_kv_head;
  int head_dim;
  int d_ffn;
  float rms_eps;
  float rope_base;
  int rope_mode; /* kvt_rope_mode */
} kvt_llama_config;

#endif
