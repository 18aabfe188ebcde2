// A llama-family model held in host memory, and the reference forward pass
// built from the reference ops (the CPU twin of the device forward in llama-forward.cu).
#pragma once
#include <vector>

#include "ref.h"

namespace kvt_ref {

struct HostLlamaLayer {
  std::vector<float> attn_norm, ffn_norm;  // [d_model]
  HostWeight wq, wk, wv, wo;               // [n_head*hd, d], [n_kv*hd, d] x2, [d, n_head*hd]
  HostWeight w_gate, w_up, w_down;         // [ffn, d] x2, [d, ffn]
};

struct HostLlama {
  kvt_llama_config cfg{};
  HostWeight tok_embd;                     // [n_vocab, d]
  std::vector<float> output_norm;          // [d]
  HostWeight output;                       // [n_vocab, d]
  std::vector<HostLlamaLayer> layers;
};

// Runs tokens[0..t) at positions pos0.. through the model, writing their K/V
// into `kv` (whose block table must cover pos0+t positions).
// logits: [t][n_vocab] when all_logits, else [1][n_vocab] for the last token.
void llama_forward(float* logits, const HostLlama& model, const HostPagedKv& kv,
                   const int32_t* tokens, int t, int pos0, bool all_logits);

// KV bytes of one page (one 64-token block of every layer), f16.
size_t llama_page_bytes(const kvt_llama_config& cfg);

}  // namespace kvt_ref
