// Multi-head Latent Attention (DeepSeek-V2/V3, GGUF `deepseek2`) over latent
// KV pages, in the absorbed form: the cache holds per token and layer one
// row [c_kv (kv_lora_rank) | k_pe (rope dims)], W_UK is folded into the query
// by the caller and W_UV applied by the caller after attention, so this is
// MQA (one kv head) whose V is the first v_dim (= kv_lora_rank) values of K.
//
// Latent page (= one kvtier block payload of an "mla" layout):
//   page[layer][64 tokens][width]      width = kv_lora_rank + rope dims, f16 or f32
#pragma once
#include <cstddef>
#include <cstdint>

#include "../kernels.h"

namespace kvt {

struct MlaLayout {
  int layers;
  int width;
  int dtype;  // F32 or F16
  size_t elem_bytes() const { return dtype == F32 ? 4 : 2; }
  size_t page_elems() const { return (size_t)layers * kPageTokens * width; }
  size_t page_bytes() const { return page_elems() * elem_bytes(); }
  // element offset of token slot `slot` of `layer` in a page
  size_t offset(int layer, int slot) const { return ((size_t)layer * kPageTokens + slot) * width; }
};

// latent [n][width] f32 → page[table[pos/64]][layer][pos%64][:], pos = pos0 .. pos0+n−1 (f16: nearest even)
void mla_kv_write(uint8_t* pages, const MlaLayout& kv, int layer, const int32_t* block_table, int pos0, int n,
                  const float* latent, ThreadPool& pool);
void mla_kv_write_ref(uint8_t* pages, const MlaLayout& kv, int layer, const int32_t* block_table, int pos0, int n,
                      const float* latent);

// q [rows][n_heads][width], out [rows][n_heads][v_dim]; query i of segment s sits at position pos0+i and
// attends keys [0, pos0+i]. Per (row, head), in this order (the same in both twins):
//   s_j = (q · k_j, fma lanes d%16, reduce16) · scale;  e_j = exp_kvt(s_j − max);  Σe in lanes j%16;
//   o = Σ_j e_j · k_j[0..v_dim) (sequential j, fma);  out = o · (1/Σe)
void mla_attention(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                   int v_dim, float scale, const AttnSegment* segs, int n_segs, ThreadPool& pool);
void mla_attention_ref(float* out, const float* q, const uint8_t* pages, const MlaLayout& kv, int layer, int n_heads,
                       int v_dim, float scale, const AttnSegment* segs, int n_segs);

}  // namespace kvt
