// Minimal GGUF reader for the driver: enough of the format (v2/v3) to load a
// llama-architecture model's hyper-parameters and F32/F16/BF16/Q8_0 tensors.
#include <cstdio>
#include <cstring>
#include <map>
#include <stdexcept>
#include <string>
#include <vector>

#include "host-model.h"

namespace kvt_driver {
namespace {

struct Reader {
  std::vector<uint8_t> buf;
  size_t pos = 0;
  void need(size_t n) {
    if (pos + n > buf.size()) throw std::runtime_error("GGUF file is truncated");
  }
  template <typename T> T get() {
    need(sizeof(T));
    T v;
    std::memcpy(&v, buf.data() + pos, sizeof(T));
    pos += sizeof(T);
    return v;
  }
  std::string str() {
    const uint64_t n = get<uint64_t>();
    need(n);
    std::string s(reinterpret_cast<const char*>(buf.data() + pos), n);
    pos += n;
    return s;
  }
};

struct Value {  // scalar metadata we care about; arrays are skipped
  double num = 0;
  std::string s;
  bool is_str = false;
};

size_t scalar_size(uint32_t t) {
  switch (t) {
    case 0: case 1: case 7: return 1;
    case 2: case 3: return 2;
    case 4: case 5: case 6: return 4;
    case 10: case 11: case 12: return 8;
    default: return 0;
  }
}

Value read_value(Reader& r, uint32_t t) {
  Value v;
  switch (t) {
    case 0: v.num = r.get<uint8_t>(); break;
    case 1: v.num = r.get<int8_t>(); break;
    case 2: v.num = r.get<uint16_t>(); break;
    case 3: v.num = r.get<int16_t>(); break;
    case 4: v.num = r.get<uint32_t>(); break;
    case 5: v.num = r.get<int32_t>(); break;
    case 6: v.num = r.get<float>(); break;
    case 7: v.num = r.get<uint8_t>(); break;
    case 8: v.s = r.str(); v.is_str = true; break;
    case 9: {
      const uint32_t et = r.get<uint32_t>();
      const uint64_t n = r.get<uint64_t>();
      if (et == 8) {
        for (uint64_t i = 0; i < n; ++i) r.str();
      } else {
        const size_t es = scalar_size(et);
        if (!es) throw std::runtime_error("GGUF: unsupported array element type");
        r.need(es * n);
        r.pos += es * n;
      }
      break;
    }
    case 10: v.num = (double)r.get<uint64_t>(); break;
    case 11: v.num = (double)r.get<int64_t>(); break;
    case 12: v.num = r.get<double>(); break;
    default: throw std::runtime_error("GGUF: unknown metadata value type " + std::to_string(t));
  }
  return v;
}

struct TensorInfo {
  std::vector<uint64_t> ne;
  uint32_t type;
  uint64_t offset;
};

}  // namespace

kvt_ref::HostLlama read_gguf_llama(const std::string& path) {
  Reader r;
  FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open GGUF file " + path);
  std::fseek(f, 0, SEEK_END);
  r.buf.resize((size_t)std::ftell(f));
  std::fseek(f, 0, SEEK_SET);
  const size_t got = std::fread(r.buf.data(), 1, r.buf.size(), f);
  std::fclose(f);
  if (got != r.buf.size()) throw std::runtime_error("short read of " + path);

  if (r.get<uint32_t>() != 0x46554747u) throw std::runtime_error(path + " is not a GGUF file");
  const uint32_t version = r.get<uint32_t>();
  if (version < 2) throw std::runtime_error("GGUF v1 is not supported; re-convert the model");
  const uint64_t n_tensors = r.get<uint64_t>(), n_kv = r.get<uint64_t>();
  std::map<std::string, Value> meta;
  for (uint64_t i = 0; i < n_kv; ++i) {
    const std::string key = r.str();
    meta[key] = read_value(r, r.get<uint32_t>());
  }
  std::map<std::string, TensorInfo> tensors;
  for (uint64_t i = 0; i < n_tensors; ++i) {
    const std::string name = r.str();
    TensorInfo ti;
    ti.ne.resize(r.get<uint32_t>());
    for (auto& d : ti.ne) d = r.get<uint64_t>();
    ti.type = r.get<uint32_t>();
    ti.offset = r.get<uint64_t>();
    tensors[name] = ti;
  }
  const size_t align = meta.count("general.alignment") ? (size_t)meta["general.alignment"].num : 32;
  const size_t data_start = (r.pos + align - 1) / align * align;

  const std::string arch = meta.count("general.architecture") ? meta["general.architecture"].s : "";
  if (arch != "llama")
    throw std::runtime_error("GGUF architecture '" + arch + "' is not supported by the driver (llama is)");
  auto num = [&](const std::string& k, double def, bool required) {
    auto it = meta.find(arch + "." + k);
    if (it == meta.end()) {
      if (required) throw std::runtime_error("GGUF is missing " + arch + "." + k);
      return def;
    }
    return it->second.num;
  };
  kvt_ref::HostLlama m;
  kvt_llama_config& c = m.cfg;
  c.d_model = (int)num("embedding_length", 0, true);
  c.n_layer = (int)num("block_count", 0, true);
  c.n_head = (int)num("attention.head_count", 0, true);
  c.n_kv_head = (int)num("attention.head_count_kv", c.n_head, false);
  c.d_ffn = (int)num("feed_forward_length", 0, true);
  c.rms_eps = (float)num("attention.layer_norm_rms_epsilon", 1e-5, false);
  c.rope_base = (float)num("rope.freq_base", 10000.0, false);
  c.head_dim = (int)num("attention.key_length", c.d_model / c.n_head, false);
  c.rope_mode = KVT_ROPE_NORMAL;  // llama GGUFs carry q/k permuted for pairwise rope

  auto load = [&](const std::string& name, kvt_ref::HostWeight& w) {
    auto it = tensors.find(name);
    if (it == tensors.end()) throw std::runtime_error("GGUF is missing tensor " + name);
    const TensorInfo& ti = it->second;
    if (ti.type != KVT_F32 && ti.type != KVT_F16 && ti.type != KVT_BF16 && ti.type != KVT_Q8_0)
      throw std::runtime_error(name + " has GGML type " + std::to_string(ti.type) +
                               "; the driver reads F32, F16, BF16 and Q8_0");
    w.type = (int)ti.type;
    w.cols = (int)ti.ne[0];
    w.rows = ti.ne.size() > 1 ? (int)ti.ne[1] : 1;
    const size_t bytes = kvt_ref::weight_bytes(w.type, w.rows, w.cols);
    if (data_start + ti.offset + bytes > r.buf.size())
      throw std::runtime_error(name + " extends past the end of the file");
    w.raw.assign(r.buf.begin() + data_start + ti.offset,
                 r.buf.begin() + data_start + ti.offset + bytes);
  };
  auto load_vec = [&](const std::string& name, std::vector<float>& v) {
    kvt_ref::HostWeight w;
    load(name, w);
    v.resize((size_t)w.rows * w.cols);
    for (int j = 0; j < w.cols; ++j) v[j] = w.at(0, j);
  };
  load("token_embd.weight", m.tok_embd);
  c.n_vocab = m.tok_embd.rows;
  if (tensors.count("output.weight")) load("output.weight", m.output);
  else m.output = m.tok_embd;  // tied embeddings
  load_vec("output_norm.weight", m.output_norm);
  m.layers.resize(c.n_layer);
  for (int l = 0; l < c.n_layer; ++l) {
    const std::string p = "blk." + std::to_string(l) + ".";
    auto& L = m.layers[l];
    load_vec(p + "attn_norm.weight", L.attn_norm);
    load_vec(p + "ffn_norm.weight", L.ffn_norm);
    load(p + "attn_q.weight", L.wq);
    load(p + "attn_k.weight", L.wk);
    load(p + "attn_v.weight", L.wv);
    load(p + "attn_output.weight", L.wo);
    load(p + "ffn_gate.weight", L.w_gate);
    load(p + "ffn_up.weight", L.w_up);
    load(p + "ffn_down.weight", L.w_down);
  }
  return m;
}

}  // namespace kvt_driver
