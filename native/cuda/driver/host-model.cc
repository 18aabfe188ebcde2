#include "host-model.h"

#include <cmath>
#include <cstring>
#include <stdexcept>

#include "../ref/half-ref.h"

namespace kvt_driver {

using kvt_ref::HostWeight;

void fill_uniform(std::vector<float>& v, Rng& rng, float scale) {
  for (float& x : v) x = rng.uniform() * scale;
}

HostWeight random_weight(int type, int rows, int cols, Rng& rng, float scale) {
  HostWeight w;
  w.type = type;
  w.rows = rows;
  w.cols = cols;
  w.raw.resize(kvt_ref::weight_bytes(type, rows, cols));
  const size_t n = (size_t)rows * cols;
  switch (type) {
    case KVT_F32: {
      float* p = reinterpret_cast<float*>(w.raw.data());
      for (size_t i = 0; i < n; ++i) p[i] = rng.uniform() * scale;
      break;
    }
    case KVT_F16:
    case KVT_BF16: {
      uint16_t* p = reinterpret_cast<uint16_t*>(w.raw.data());
      for (size_t i = 0; i < n; ++i) {
        const float v = rng.uniform() * scale;
        p[i] = type == KVT_F16 ? kvt_ref::float_to_half(v) : kvt_ref::float_to_bf16(v);
      }
      break;
    }
    case KVT_Q8_0: {
      kvt_block_q8_0* b = reinterpret_cast<kvt_block_q8_0*>(w.raw.data());
      float vals[32];
      for (size_t blk = 0; blk < n / 32; ++blk) {
        float amax = 0;
        for (float& v : vals) {
          v = rng.uniform() * scale;
          amax = std::fmax(amax, std::fabs(v));
        }
        const float d = amax / 127.f;
        kvt_block_q8_0 out;
        out.d_bits = kvt_ref::float_to_half(d);
        for (int j = 0; j < 32; ++j) out.qs[j] = (int8_t)std::lround(d > 0 ? vals[j] / d : 0.f);
        std::memcpy(b + blk, &out, sizeof out);
      }
      break;
    }
    default:
      throw std::invalid_argument("random_weight: unsupported type");
  }
  return w;
}

kvt_ref::HostLlama random_llama(const kvt_llama_config& c, int type, uint64_t seed) {
  Rng rng(seed);
  kvt_ref::HostLlama m;
  m.cfg = c;
  const int d = c.d_model, qd = c.n_head * c.head_dim, kvd = c.n_kv_head * c.head_dim;
  const float sd = 1.f / std::sqrt((float)d), sf = 1.f / std::sqrt((float)c.d_ffn),
              sq = 1.f / std::sqrt((float)qd);
  m.tok_embd = random_weight(type, c.n_vocab, d, rng, 1.f);
  // A sharper output head keeps the top-2 logit margins far above the
  // kernels' rounding, so greedy decoding is a well-posed comparison.
  m.output = random_weight(type, c.n_vocab, d, rng, 4.f * sd);
  m.output_norm.resize(d);
  for (float& g : m.output_norm) g = 1.f + 0.1f * rng.uniform();
  m.layers.resize(c.n_layer);
  for (auto& L : m.layers) {
    L.attn_norm.resize(d);
    L.ffn_norm.resize(d);
    for (float& g : L.attn_norm) g = 1.f + 0.1f * rng.uniform();
    for (float& g : L.ffn_norm) g = 1.f + 0.1f * rng.uniform();
    // Larger q/k weights make attention far from uniform, so a wrong mask or
    // a wrong page would change the answer.
    L.wq = random_weight(type, qd, d, rng, 3.f * sd);
    L.wk = random_weight(type, kvd, d, rng, 3.f * sd);
    L.wv = random_weight(type, kvd, d, rng, sd);
    L.wo = random_weight(type, d, qd, rng, sq);
    L.w_gate = random_weight(type, c.d_ffn, d, rng, sd);
    L.w_up = random_weight(type, c.d_ffn, d, rng, sd);
    L.w_down = random_weight(type, d, c.d_ffn, rng, sf);
  }
  return m;
}

namespace {
kvt_cuda_status bind(kvt_cuda_ctx* ctx, kvt_cuda_model* model, const std::string& name,
                     const HostWeight& w) {
  int32_t id;
  kvt_cuda_status st = kvt_cuda_weight_upload(ctx, w.type, w.rows, w.cols, w.raw.data(), &id);
  return st != KVT_CUDA_OK ? st : kvt_cuda_model_bind(model, name.c_str(), id);
}
kvt_cuda_status bind_vec(kvt_cuda_ctx* ctx, kvt_cuda_model* model, const std::string& name,
                         const std::vector<float>& v) {
  int32_t id;
  kvt_cuda_status st = kvt_cuda_weight_upload(ctx, KVT_F32, 1, (int)v.size(), v.data(), &id);
  return st != KVT_CUDA_OK ? st : kvt_cuda_model_bind(model, name.c_str(), id);
}
}  // namespace

kvt_cuda_status upload_llama(kvt_cuda_ctx* ctx, const kvt_ref::HostLlama& m, kvt_cuda_model** out) {
  kvt_cuda_model* model = nullptr;
  kvt_cuda_status st = kvt_cuda_model_create(ctx, &m.cfg, &model);
  if (st != KVT_CUDA_OK) return st;
#define KVT_B(expr) do { st = (expr); if (st != KVT_CUDA_OK) { kvt_cuda_model_destroy(model); return st; } } while (0)
  KVT_B(bind(ctx, model, "token_embd.weight", m.tok_embd));
  KVT_B(bind(ctx, model, "output.weight", m.output));
  KVT_B(bind_vec(ctx, model, "output_norm.weight", m.output_norm));
  for (int l = 0; l < m.cfg.n_layer; ++l) {
    const auto& L = m.layers[l];
    const std::string p = "blk." + std::to_string(l) + ".";
    KVT_B(bind_vec(ctx, model, p + "attn_norm.weight", L.attn_norm));
    KVT_B(bind_vec(ctx, model, p + "ffn_norm.weight", L.ffn_norm));
    KVT_B(bind(ctx, model, p + "attn_q.weight", L.wq));
    KVT_B(bind(ctx, model, p + "attn_k.weight", L.wk));
    KVT_B(bind(ctx, model, p + "attn_v.weight", L.wv));
    KVT_B(bind(ctx, model, p + "attn_output.weight", L.wo));
    KVT_B(bind(ctx, model, p + "ffn_gate.weight", L.w_gate));
    KVT_B(bind(ctx, model, p + "ffn_up.weight", L.w_up));
    KVT_B(bind(ctx, model, p + "ffn_down.weight", L.w_down));
  }
#undef KVT_B
  *out = model;
  return KVT_CUDA_OK;
}

}  // namespace kvt_driver
