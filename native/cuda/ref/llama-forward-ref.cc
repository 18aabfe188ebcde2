#include <cmath>
#include <vector>

#include "llama-ref.h"

namespace kvt_ref {

size_t llama_page_bytes(const kvt_llama_config& c) {
  return (size_t)c.n_layer * 2 * c.n_kv_head * KVT_PAGE_TOKENS * c.head_dim * 2;
}

// The same op sequence as the device forward (cuda/llama-forward.cu):
//   x = embed(tokens)
//   per layer: h = rmsnorm(x); q,k,v = h·Wq,Wk,Wv; rope(q,k); kv_write(k,v);
//              x += attention(q)·Wo; h = rmsnorm(x); x += (silu(h·Wg) * h·Wu)·Wd
//   logits = rmsnorm(x)·Wout
void llama_forward(float* logits, const HostLlama& m, const HostPagedKv& kv,
                   const int32_t* tokens, int t, int pos0, bool all_logits) {
  const kvt_llama_config& c = m.cfg;
  const int d = c.d_model, hd = c.head_dim;
  const int qd = c.n_head * hd, kvd = c.n_kv_head * hd;
  std::vector<float> x((size_t)t * d), h((size_t)t * d), q((size_t)t * qd), k((size_t)t * kvd),
      v((size_t)t * kvd), att((size_t)t * qd), g((size_t)t * c.d_ffn), u((size_t)t * c.d_ffn);
  embed(x.data(), m.tok_embd, tokens, t);
  std::vector<int32_t> positions(t);
  for (int i = 0; i < t; ++i) positions[i] = pos0 + i;
  const float scale = 1.0f / std::sqrt((float)hd);
  for (int l = 0; l < c.n_layer; ++l) {
    const HostLlamaLayer& L = m.layers[l];
    rmsnorm(h.data(), x.data(), L.attn_norm.data(), t, d, c.rms_eps);
    matmul(q.data(), h.data(), L.wq, t, false);
    matmul(k.data(), h.data(), L.wk, t, false);
    matmul(v.data(), h.data(), L.wv, t, false);
    rope(q.data(), positions.data(), t, c.n_head, hd, hd, c.rope_base, c.rope_mode);
    rope(k.data(), positions.data(), t, c.n_kv_head, hd, hd, c.rope_base, c.rope_mode);
    kv_write(kv, k.data(), v.data(), l, t, pos0);
    attention(att.data(), q.data(), kv, l, t, c.n_head, pos0, scale);
    matmul(x.data(), att.data(), L.wo, t, true);
    rmsnorm(h.data(), x.data(), L.ffn_norm.data(), t, d, c.rms_eps);
    matmul(g.data(), h.data(), L.w_gate, t, false);
    matmul(u.data(), h.data(), L.w_up, t, false);
    swiglu(g.data(), g.data(), u.data(), (size_t)t * c.d_ffn);
    matmul(x.data(), g.data(), L.w_down, t, true);
  }
  const int rows = all_logits ? t : 1;
  const float* last = x.data() + (size_t)(t - rows) * d;
  rmsnorm(h.data(), last, m.output_norm.data(), rows, d, c.rms_eps);
  matmul(logits, h.data(), m.output, rows, false);
}

}  // namespace kvt_ref
