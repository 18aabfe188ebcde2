// Minimal GGUF v3 writer (the reader's test partner): metadata scalars and
// F32/F16/BF16/Q8_0 tensors of a HostLlama.
#include <cstdio>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "gguf-writer.h"

namespace kvt_driver {
namespace {

struct Out {
  std::vector<uint8_t> b;
  template <typename T> void put(T v) {
    const size_t n = b.size();
    b.resize(n + sizeof(T));
    std::memcpy(b.data() + n, &v, sizeof(T));
  }
  void str(const std::string& s) {
    put<uint64_t>(s.size());
    b.insert(b.end(), s.begin(), s.end());
  }
};

}  // namespace

void write_gguf_llama(const std::string& path, const kvt_ref::HostLlama& m) {
  struct T { std::string name; const kvt_ref::HostWeight* w; kvt_ref::HostWeight vec; };
  std::vector<T> ts;
  auto add_vec = [&](const std::string& n, const std::vector<float>& v) {
    kvt_ref::HostWeight w;
    w.type = KVT_F32;
    w.rows = 1;
    w.cols = (int)v.size();
    w.raw.resize(v.size() * 4);
    std::memcpy(w.raw.data(), v.data(), v.size() * 4);
    ts.push_back({n, nullptr, w});
  };
  ts.push_back({"token_embd.weight", &m.tok_embd, {}});
  ts.push_back({"output.weight", &m.output, {}});
  add_vec("output_norm.weight", m.output_norm);
  for (int l = 0; l < m.cfg.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    const auto& L = m.layers[l];
    add_vec(p + "attn_norm.weight", L.attn_norm);
    add_vec(p + "ffn_norm.weight", L.ffn_norm);
    ts.push_back({p + "attn_q.weight", &L.wq, {}});
    ts.push_back({p + "attn_k.weight", &L.wk, {}});
    ts.push_back({p + "attn_v.weight", &L.wv, {}});
    ts.push_back({p + "attn_output.weight", &L.wo, {}});
    ts.push_back({p + "ffn_gate.weight", &L.w_gate, {}});
    ts.push_back({p + "ffn_up.weight", &L.w_up, {}});
    ts.push_back({p + "ffn_down.weight", &L.w_down, {}});
  }
  const kvt_llama_config& c = m.cfg;
  Out o;
  o.put<uint32_t>(0x46554747u);
  o.put<uint32_t>(3);
  o.put<uint64_t>(ts.size());
  o.put<uint64_t>(9);
  o.str("general.architecture"); o.put<uint32_t>(8); o.str("llama");
  auto u32 = [&](const char* k, uint32_t v) { o.str(k); o.put<uint32_t>(4); o.put<uint32_t>(v); };
  auto f32 = [&](const char* k, float v) { o.str(k); o.put<uint32_t>(6); o.put<float>(v); };
  u32("llama.embedding_length", c.d_model);
  u32("llama.block_count", c.n_layer);
  u32("llama.attention.head_count", c.n_head);
  u32("llama.attention.head_count_kv", c.n_kv_head);
  u32("llama.feed_forward_length", c.d_ffn);
  u32("llama.attention.key_length", c.head_dim);
  f32("llama.attention.layer_norm_rms_epsilon", c.rms_eps);
  f32("llama.rope.freq_base", c.rope_base);
  uint64_t off = 0;
  for (const T& t : ts) {
    const kvt_ref::HostWeight& w = t.w ? *t.w : t.vec;
    o.str(t.name);
    o.put<uint32_t>(w.rows == 1 ? 1 : 2);
    o.put<uint64_t>(w.cols);
    if (w.rows != 1) o.put<uint64_t>(w.rows);
    o.put<uint32_t>(w.type);
    o.put<uint64_t>(off);
    off += (w.bytes() + 31) / 32 * 32;
  }
  o.b.resize((o.b.size() + 31) / 32 * 32, 0);
  for (const T& t : ts) {
    const kvt_ref::HostWeight& w = t.w ? *t.w : t.vec;
    o.b.insert(o.b.end(), w.raw.begin(), w.raw.end());
    o.b.resize((o.b.size() + 31) / 32 * 32, 0);
  }
  FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) throw std::runtime_error("cannot write " + path);
  const size_t n = std::fwrite(o.b.data(), 1, o.b.size(), f);
  std::fclose(f);
  if (n != o.b.size()) throw std::runtime_error("short write of " + path);
}

}  // namespace kvt_driver
