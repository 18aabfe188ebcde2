// N-API entry point of the kvtier compute core: argument checking and thin
// calls into the kernels. Every pointer+length from JS is checked here, so a
// wrong shape from TypeScript is a thrown error, never a stray write.
// Errors carry `code` = KVT_ERR_NATIVE_<WHAT>.
#include <napi.h>

#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "dispatch.h"
#include "kernels.h"
#include "memory.h"
#include "ops/matmul-legacy.h"
#include "ops/matmul-kquant.h"
#include "ops/mla-attention.h"
#include "quant/blocks.h"
#include "quant/quant.h"
#include "thread-pool.h"

using namespace kvt;

namespace kvt {
void register_kv_codec(Napi::Env env, Napi::Object exports);  // kv-codec-napi.cc
void register_sampling(Napi::Env env, Napi::Object exports);  // sample-napi.cc
void register_xxh64(Napi::Env env, Napi::Object exports);     // xxh64-napi.cc
void register_aes_gcm(Napi::Env env, Napi::Object exports);   // aes-gcm-napi.cc
void register_window_ops(Napi::Env env, Napi::Object exports); // window-ops-napi.cc
}

namespace {

constexpr int kAbiVersion = 2;

void throw_code(Napi::Env env, const char* code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  e.ThrowAsJavaScriptException();
}

struct Bytes {
  uint8_t* p = nullptr;
  size_t n = 0;
};

// ArrayBuffer or any ArrayBufferView.
bool get_bytes(const Napi::CallbackInfo& info, size_t i, Bytes* out, const char* what) {
  Napi::Value v = info[i];
  if (v.IsArrayBuffer()) {
    auto ab = v.As<Napi::ArrayBuffer>();
    out->p = static_cast<uint8_t*>(ab.Data());
    out->n = ab.ByteLength();
    return true;
  }
  if (v.IsTypedArray()) {
    auto ta = v.As<Napi::TypedArray>();
    out->p = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    out->n = ta.ByteLength();
    return true;
  }
  if (v.IsDataView()) {
    auto dv = v.As<Napi::DataView>();
    out->p = static_cast<uint8_t*>(dv.ArrayBuffer().Data()) + dv.ByteOffset();
    out->n = dv.ByteLength();
    return true;
  }
  throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an ArrayBuffer or typed array");
  return false;
}

template <typename T>
bool get_typed(const Napi::CallbackInfo& info, size_t i, napi_typedarray_type type, T** ptr, size_t* count,
               const char* what) {
  Napi::Value v = info[i];
  if (!v.IsTypedArray() || v.As<Napi::TypedArray>().TypedArrayType() != type) {
    const char* tn = type == napi_float32_array ? "Float32Array" : type == napi_int32_array ? "Int32Array" : "typed array";
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected a " + tn);
    return false;
  }
  auto ta = v.As<Napi::TypedArray>();
  *ptr = reinterpret_cast<T*>(static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset());
  *count = ta.ElementLength();
  return true;
}

bool get_f32(const Napi::CallbackInfo& info, size_t i, float** p, size_t* n, const char* what) {
  return get_typed(info, i, napi_float32_array, p, n, what);
}
bool get_i32(const Napi::CallbackInfo& info, size_t i, int32_t** p, size_t* n, const char* what) {
  return get_typed(info, i, napi_int32_array, p, n, what);
}

bool get_int(const Napi::CallbackInfo& info, size_t i, int* out, const char* what, int lo = 0, int hi = 1 << 30) {
  Napi::Value v = info[i];
  if (!v.IsNumber()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an integer");
    return false;
  }
  double d = v.As<Napi::Number>().DoubleValue();
  if (d != (double)(int64_t)d || d < lo || d > hi) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG",
               std::string(what) + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                   "], got " + std::to_string(d));
    return false;
  }
  *out = (int)d;
  return true;
}

bool get_float(const Napi::CallbackInfo& info, size_t i, float* out, const char* what) {
  if (!info[i].IsNumber()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected a number");
    return false;
  }
  *out = (float)info[i].As<Napi::Number>().DoubleValue();
  return true;
}

bool need(Napi::Env env, bool ok, const std::string& msg) {
  if (!ok) throw_code(env, "KVT_ERR_NATIVE_SHAPE", msg);
  return ok;
}

bool valid_weight_dtype(int d) {
  return d == F32 || d == F16 || d == BF16 || d == Q8_0 || is_legacy_quant(d) ||  // ops/matmul-legacy.h
         is_kquant(d);                                                             // ops/matmul-kquant.h
}

// Types quantize/dequantize/embed accept: the weight types plus every type
// with a block quantizer (quant/quant.h), matmul kernel or not.
bool valid_convert_dtype(int d) { return valid_weight_dtype(d) || has_block_quantizer(d); }

bool check_convert_count(Napi::Env env, const char* what, int dtype, size_t count) {
  if (!need(env, valid_convert_dtype(dtype),
            std::string(what) + ": dtype " + std::to_string(dtype) +
                " is not a GGML type id kvtier converts (F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K..Q6_K, "
                "IQ4_NL, IQ4_XS)"))
    return false;
  const int qk = block_geometry(dtype).elems;
  return need(env, count % (size_t)qk == 0,
              std::string(what) + ": count " + std::to_string(count) + " must be a multiple of the type's block of " +
                  std::to_string(qk) + " values");
}

bool check_weight_shape(Napi::Env env, int dtype, int rows, int cols) {
  if (!need(env, valid_weight_dtype(dtype),
            "weight dtype must be a GGML type id: 0 (F32), 1 (F16), 2 (Q4_0), 3 (Q4_1), 6 (Q5_0), 7 (Q5_1), 8 (Q8_0), "
            "10..14 (Q2_K..Q6_K), 20 (IQ4_NL), 23 (IQ4_XS), 30 (BF16)"))
    return false;
  const int qk = block_geometry(dtype).elems;  // 1, 32 or 256 values per block
  return need(env, rows > 0 && cols > 0, "weight rows and cols must be > 0") &&
         need(env, cols % qk == 0, "weights of GGML type " + std::to_string(dtype) + " need cols % " + std::to_string(qk) +
                                       " == 0 (whole blocks per row), got cols = " + std::to_string(cols));
}

// ---- buffers owned by JS (external ArrayBuffers) ---------------------------

struct AlignedHint {
  size_t bytes;
};

Napi::ArrayBuffer external_aligned(Napi::Env env, size_t bytes) {
  void* p = alloc_aligned(bytes);
  if (!p) {
    throw_code(env, "KVT_ERR_NATIVE_OOM", "could not allocate " + std::to_string(bytes) + " bytes");
    return Napi::ArrayBuffer();
  }
  Napi::MemoryManagement::AdjustExternalMemory(env, (int64_t)bytes);
  return Napi::ArrayBuffer::New(
      env, p, bytes,
      [](Napi::Env e, void* data, AlignedHint* hint) {
        Napi::MemoryManagement::AdjustExternalMemory(e, -(int64_t)hint->bytes);
        free_aligned(data, hint->bytes);
        delete hint;
      },
      new AlignedHint{bytes});
}

// Live file mappings by base address: unmapFile and the GC finalizer race for
// each entry; whoever erases it unmaps. An address is not an identity: after
// unmapFile the kernel may hand the same address to the next mapping while the
// first ArrayBuffer still awaits collection, so each mapping carries a serial
// and a finalizer only erases the entry whose serial it was given.
struct LiveMapping {
  Mapping mapping;
  uint64_t serial;
};
struct MappingTicket {
  void* addr;
  uint64_t serial;
};
std::mutex g_map_mutex;
std::unordered_map<void*, LiveMapping> g_maps;
uint64_t g_next_map_serial = 1;

// ---- functions ---------------------------------------------------------------

Napi::Value Info(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Napi::Object o = Napi::Object::New(env);
  o.Set("abiVersion", kAbiVersion);
  o.Set("isa", active_kernels().isa);
  auto isas = available_isas();
  Napi::Array a = Napi::Array::New(env, isas.size());
  for (size_t i = 0; i < isas.size(); ++i) a.Set((uint32_t)i, isas[i]);
  o.Set("isasAvailable", a);
  o.Set("threads", global_pool().size());
  return o;
}

Napi::Value SetIsa(const Napi::CallbackInfo& info) {
  if (!info[0].IsString()) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", "setIsa: expected 'scalar', 'avx2' or 'avx512'");
    return info.Env().Undefined();
  }
  std::string why;
  if (!set_isa(info[0].As<Napi::String>().Utf8Value(), &why)) throw_code(info.Env(), "KVT_ERR_NATIVE_ISA", why);
  return info.Env().Undefined();
}

Napi::Value SetThreads(const Napi::CallbackInfo& info) {
  int n;
  if (!get_int(info, 0, &n, "threads", 0, 1024)) return info.Env().Undefined();
  set_global_threads(n);
  return Napi::Number::New(info.Env(), global_pool().size());
}

Napi::Value HandoffNs(const Napi::CallbackInfo& info) {
  int iters;
  if (!get_int(info, 0, &iters, "iterations", 1, 100000000)) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), measure_handoff_ns(global_pool(), iters));
}

Napi::Value AllocAligned(const Napi::CallbackInfo& info) {
  Napi::Value v = info[0];
  if (!v.IsNumber() || v.As<Napi::Number>().DoubleValue() < 0) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_ARG", "allocAligned: expected a byte count >= 0");
    return info.Env().Undefined();
  }
  return external_aligned(info.Env(), (size_t)v.As<Napi::Number>().DoubleValue());
}

Napi::Value MmapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsString()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "mmapFile: expected a path string");
    return env.Undefined();
  }
  Mapping m;
  std::string why;
  if (!map_file(info[0].As<Napi::String>().Utf8Value(), &m, &why)) {
    throw_code(env, "KVT_ERR_NATIVE_MMAP", why);
    return env.Undefined();
  }
  if (m.bytes == 0) return Napi::ArrayBuffer::New(env, 0);
  auto* ticket = new MappingTicket{m.addr, 0};
  {
    std::lock_guard<std::mutex> lock(g_map_mutex);
    ticket->serial = g_next_map_serial++;
    g_maps[m.addr] = LiveMapping{m, ticket->serial};
  }
  return Napi::ArrayBuffer::New(
      env, m.addr, m.bytes,
      [](Napi::Env, void*, MappingTicket* t) {
        Mapping found{nullptr, 0};
        {
          std::lock_guard<std::mutex> lock(g_map_mutex);
          auto it = g_maps.find(t->addr);
          if (it != g_maps.end() && it->second.serial == t->serial) {
            found = it->second.mapping;
            g_maps.erase(it);
          }
        }
        delete t;
        unmap(found);
      },
      ticket);
}

// Detaches the buffer (every view of it reads as length 0 afterwards) and unmaps.
Napi::Value UnmapFile(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (!info[0].IsArrayBuffer()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "unmapFile: expected the ArrayBuffer returned by mmapFile");
    return env.Undefined();
  }
  auto ab = info[0].As<Napi::ArrayBuffer>();
  void* data = ab.Data();
  Mapping found{nullptr, 0};
  {
    std::lock_guard<std::mutex> lock(g_map_mutex);
    auto it = g_maps.find(data);
    if (it == g_maps.end()) return Napi::Boolean::New(env, false);
    found = it->second.mapping;
    g_maps.erase(it);
  }
  if (!ab.IsDetached()) ab.Detach();
  unmap(found);
  return Napi::Boolean::New(env, true);
}

Napi::Value PackedWeightBytes(const Napi::CallbackInfo& info) {
  int dtype, rows, cols;
  if (!get_int(info, 0, &dtype, "dtype") || !get_int(info, 1, &rows, "rows", 1) || !get_int(info, 2, &cols, "cols", 1))
    return info.Env().Undefined();
  if (!check_weight_shape(info.Env(), dtype, rows, cols)) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), (double)packed_weight_bytes(dtype, rows, cols));
}

// packWeight(dtype, rows, cols, ggufBytes) → ArrayBuffer (packed)
Napi::Value PackWeight(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  int dtype, rows, cols;
  Bytes src;
  if (!get_int(info, 0, &dtype, "dtype") || !get_int(info, 1, &rows, "rows", 1) || !get_int(info, 2, &cols, "cols", 1) ||
      !get_bytes(info, 3, &src, "weight bytes"))
    return env.Undefined();
  if (!check_weight_shape(env, dtype, rows, cols)) return env.Undefined();
  size_t want = gguf_row_bytes(dtype, cols) * (size_t)rows;
  if (!need(env, src.n >= want,
            "weight bytes: need " + std::to_string(want) + " bytes for [" + std::to_string(rows) + "][" +
                std::to_string(cols) + "], got " + std::to_string(src.n)))
    return env.Undefined();
  Napi::ArrayBuffer ab = external_aligned(env, packed_weight_bytes(dtype, rows, cols));
  if (env.IsExceptionPending()) return env.Undefined();
  pack_weight(static_cast<uint8_t*>(ab.Data()), dtype, rows, cols, src.p, global_pool());
  return ab;
}

// matmul(out, x, packed, dtype, rows, cols, m) | matmulRef(out, x, gguf, dtype, rows, cols, m)
template <bool kRef>
Napi::Value Matmul(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x;
  size_t n_out, n_x;
  Bytes w;
  int dtype, rows, cols, m;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_bytes(info, 2, &w, "w") ||
      !get_int(info, 3, &dtype, "dtype") || !get_int(info, 4, &rows, "rows", 1) || !get_int(info, 5, &cols, "cols", 1) ||
      !get_int(info, 6, &m, "m", 0))
    return env.Undefined();
  if (!check_weight_shape(env, dtype, rows, cols)) return env.Undefined();
  size_t want_w = kRef ? gguf_row_bytes(dtype, cols) * (size_t)rows : packed_weight_bytes(dtype, rows, cols);
  if (!need(env, w.n >= want_w, "matmul: weight buffer too small for its shape") ||
      !need(env, n_x >= (size_t)m * cols, "matmul: x needs m*cols = " + std::to_string((size_t)m * cols) + " floats") ||
      !need(env, n_out >= (size_t)m * rows, "matmul: out needs m*rows = " + std::to_string((size_t)m * rows) + " floats"))
    return env.Undefined();
  if (kRef) matmul_ref(out, x, w.p, dtype, rows, cols, m);
  else active_kernels().matmul(out, x, PackedWeight{dtype, rows, cols, w.p}, m, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value RmsNorm(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x, *g;
  size_t n_out, n_x, n_g;
  int rows, dim;
  float eps;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") || !get_f32(info, 2, &g, &n_g, "gain") ||
      !get_int(info, 3, &rows, "rows") || !get_int(info, 4, &dim, "dim", 1) || !get_float(info, 5, &eps, "eps"))
    return env.Undefined();
  size_t n = (size_t)rows * dim;
  if (!need(env, n_out >= n && n_x >= n && n_g >= (size_t)dim, "rmsNorm: out/x need rows*dim floats, gain dim floats"))
    return env.Undefined();
  if (kRef) rmsnorm_ref(out, x, g, rows, dim, eps);
  else active_kernels().rmsnorm(out, x, g, rows, dim, eps, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value Softmax(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* x;
  size_t n_x;
  int rows, cols;
  if (!get_f32(info, 0, &x, &n_x, "x") || !get_int(info, 1, &rows, "rows") || !get_int(info, 2, &cols, "cols", 1))
    return env.Undefined();
  if (!need(env, n_x >= (size_t)rows * cols, "softmax: x needs rows*cols floats")) return env.Undefined();
  if (kRef) softmax_ref(x, rows, cols);
  else active_kernels().softmax(x, rows, cols, global_pool());
  return env.Undefined();
}

template <bool kRef, bool kSwiglu>
Napi::Value Binary(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *a, *b;
  size_t n_out, n_a, n_b;
  int n;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &a, &n_a, "a") || !get_f32(info, 2, &b, &n_b, "b") ||
      !get_int(info, 3, &n, "n"))
    return env.Undefined();
  if (!need(env, n_out >= (size_t)n && n_a >= (size_t)n && n_b >= (size_t)n, "out, a and b need n floats each"))
    return env.Undefined();
  if (kSwiglu) {
    if (kRef) swiglu_ref(out, a, b, n);
    else active_kernels().swiglu(out, a, b, n, global_pool());
  } else {
    if (kRef) add_ref(out, a, b, n);
    else active_kernels().add(out, a, b, n, global_pool());
  }
  return env.Undefined();
}

// rope(x, positions, rows, heads, headDim, rotDims, mode, freqBase[, scaling[, freqFactors]])
//   scaling:     Float32Array [freqScale, extFactor, attnFactor, betaFast, betaSlow, nCtxOrig] (see RopeParams)
//   freqFactors: Float32Array [rotDims/2] of theta divisors (rope_freqs.weight)
// An absent, undefined or null scaling / freqFactors means plain RoPE.
template <bool kRef>
Napi::Value Rope(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* x;
  int32_t* pos;
  size_t n_x, n_pos;
  int rows, heads, hd, rot, mode;
  float base;
  if (!get_f32(info, 0, &x, &n_x, "x") || !get_i32(info, 1, &pos, &n_pos, "positions") ||
      !get_int(info, 2, &rows, "rows") || !get_int(info, 3, &heads, "heads", 1) || !get_int(info, 4, &hd, "headDim", 1) ||
      !get_int(info, 5, &rot, "rotDims", 0) || !get_int(info, 6, &mode, "mode", 0, 2) || !get_float(info, 7, &base, "freqBase"))
    return env.Undefined();
  if (!need(env, n_x >= (size_t)rows * heads * hd, "rope: x needs rows*heads*headDim floats") ||
      !need(env, n_pos >= (size_t)rows, "rope: positions needs rows entries") ||
      !need(env, rot % 2 == 0 && rot <= hd, "rope: rotDims must be even and <= headDim") ||
      !need(env, mode == 0 || mode == 2, "rope: mode must be 0 (normal) or 2 (neox)") ||
      !need(env, base > 0, "rope: freqBase must be > 0"))
    return env.Undefined();
  RopeParams p;
  p.rot_dims = rot;
  p.mode = mode;
  p.freq_base = base;
  auto present = [&](size_t i) { return info.Length() > i && !info[i].IsUndefined() && !info[i].IsNull(); };
  if (present(8)) {
    float* sc;
    size_t n_sc;
    if (!get_f32(info, 8, &sc, &n_sc, "scaling")) return env.Undefined();
    if (!need(env, n_sc == 6, "rope: scaling holds [freqScale, extFactor, attnFactor, betaFast, betaSlow, nCtxOrig]"))
      return env.Undefined();
    p.freq_scale = sc[0];
    p.ext_factor = sc[1];
    p.attn_factor = sc[2];
    p.beta_fast = sc[3];
    p.beta_slow = sc[4];
    p.n_ctx_orig = (int)sc[5];
    bool finite = true;
    for (int i = 0; i < 6; ++i) finite = finite && std::isfinite(sc[i]);
    if (!need(env, finite, "rope: scaling values must be finite") ||
        !need(env, p.freq_scale > 0, "rope: freqScale must be > 0 (it is 1/factor)") ||
        !need(env, p.ext_factor == 0 || (p.n_ctx_orig > 0 && p.beta_fast > 0 && p.beta_slow > 0 && (float)p.n_ctx_orig == sc[5]),
              "rope: YaRN (extFactor != 0) needs an integer nCtxOrig > 0 and betaFast, betaSlow > 0"))
      return env.Undefined();
  }
  if (present(9)) {
    float* ff;
    size_t n_ff;
    if (!get_f32(info, 9, &ff, &n_ff, "freqFactors")) return env.Undefined();
    if (!need(env, n_ff >= (size_t)rot / 2, "rope: freqFactors needs rotDims/2 values")) return env.Undefined();
    for (size_t i = 0; i < (size_t)rot / 2; ++i)
      if (!need(env, std::isfinite(ff[i]) && ff[i] > 0, "rope: freqFactors must be finite and > 0")) return env.Undefined();
    p.freq_factors = ff;
  }
  if (kRef) rope_ref(x, pos, rows, heads, hd, p);
  else rope(x, pos, rows, heads, hd, p, global_pool());
  return env.Undefined();
}

// embed(out, table, dtype, rows, cols, tokens)
template <bool kRef>
Napi::Value Embed(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* out;
  size_t n_out, n_tok;
  Bytes table;
  int dtype, rows, cols;
  int32_t* tok;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_bytes(info, 1, &table, "table") || !get_int(info, 2, &dtype, "dtype") ||
      !get_int(info, 3, &rows, "rows", 1) || !get_int(info, 4, &cols, "cols", 1) || !get_i32(info, 5, &tok, &n_tok, "tokens"))
    return env.Undefined();
  if (!need(env, rows > 0 && cols > 0, "embed: rows and cols must be > 0") ||
      !check_convert_count(env, "embed: cols", dtype, (size_t)cols))
    return env.Undefined();
  if (!need(env, table.n >= gguf_row_bytes(dtype, cols) * (size_t)rows, "embed: table buffer too small for its shape") ||
      !need(env, n_out >= n_tok * (size_t)cols, "embed: out needs tokens*cols floats"))
    return env.Undefined();
  for (size_t i = 0; i < n_tok; ++i)
    if (tok[i] < 0 || tok[i] >= rows) {
      throw_code(env, "KVT_ERR_NATIVE_TOKEN",
                 "embed: token id " + std::to_string(tok[i]) + " out of range [0, " + std::to_string(rows) + ")");
      return env.Undefined();
    }
  if (kRef) embed_ref(out, table.p, dtype, rows, cols, tok, (int)n_tok);
  else embed(out, table.p, dtype, rows, cols, tok, (int)n_tok, global_pool());
  return env.Undefined();
}

// KV args at [i..i+4]: pages, layers, kvHeads, headDim, kvDtype. Checks the pool size.
bool get_kv(const Napi::CallbackInfo& info, size_t i, Bytes* pages, KvLayout* kv, size_t* n_pages) {
  Napi::Env env = info.Env();
  if (!get_bytes(info, i, pages, "pages") || !get_int(info, i + 1, &kv->layers, "layers", 1) ||
      !get_int(info, i + 2, &kv->kv_heads, "kvHeads", 1) || !get_int(info, i + 3, &kv->head_dim, "headDim", 1, 256) ||
      !get_int(info, i + 4, &kv->dtype, "kvDtype"))
    return false;
  if (!need(env, kv->dtype == F32 || kv->dtype == F16, "kv dtype must be 0 (F32) or 1 (F16)")) return false;
  size_t pb = kv->page_bytes();
  *n_pages = pb ? pages->n / pb : 0;
  return need(env, *n_pages > 0, "kv pool smaller than one page");
}

bool check_table(Napi::Env env, const int32_t* table, size_t n_table, size_t n_pages, int tokens) {
  size_t blocks = ((size_t)tokens + kPageTokens - 1) / kPageTokens;
  if (!need(env, n_table >= blocks,
            "block table has " + std::to_string(n_table) + " pages, positions need " + std::to_string(blocks)))
    return false;
  for (size_t b = 0; b < blocks; ++b)
    if (!need(env, table[b] >= 0 && (size_t)table[b] < n_pages,
              "block table entry " + std::to_string(table[b]) + " out of range [0, " + std::to_string(n_pages) + ")"))
      return false;
  return true;
}

// Attention segments: segs holds [tableOffset, tableLen, pos0, nQueries] per
// segment, into tables; checks each range and block table against the pool
// and gives rows = Σ nQueries (the segments' query rows are consecutive).
bool get_segments(Napi::Env env, const std::string& op, int32_t* tables, size_t n_tables, const int32_t* segs,
                  size_t n_segs4, size_t n_pages, std::vector<AttnSegment>* sg, int* rows) {
  if (!need(env, n_segs4 % 4 == 0, op + ": segments must hold 4 ints per segment")) return false;
  sg->resize(n_segs4 / 4);
  *rows = 0;
  for (size_t s = 0; s < sg->size(); ++s) {
    int off = segs[s * 4], len = segs[s * 4 + 1], pos0 = segs[s * 4 + 2], nq = segs[s * 4 + 3];
    if (!need(env, off >= 0 && len >= 0 && (size_t)off + len <= n_tables && pos0 >= 0 && nq >= 0,
              op + ": segment " + std::to_string(s) + " has a bad table range, pos0 or query count") ||
        !check_table(env, tables + off, (size_t)len, n_pages, pos0 + nq))
      return false;
    (*sg)[s] = AttnSegment{tables + off, len, pos0, nq, *rows};
    *rows += nq;
  }
  return true;
}

// kvWrite(pages, layers, kvHeads, headDim, kvDtype, layer, blockTable, pos0, n, k, v)
template <bool kRef>
Napi::Value KvWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes pages;
  KvLayout kv;
  size_t n_pages, n_table, n_k, n_v;
  int layer, pos0, n;
  int32_t* table;
  float *k, *v;
  if (!get_kv(info, 0, &pages, &kv, &n_pages) || !get_int(info, 5, &layer, "layer") || !get_i32(info, 6, &table, &n_table, "blockTable") ||
      !get_int(info, 7, &pos0, "pos0") || !get_int(info, 8, &n, "n") || !get_f32(info, 9, &k, &n_k, "k") ||
      !get_f32(info, 10, &v, &n_v, "v"))
    return env.Undefined();
  size_t row = (size_t)kv.kv_heads * kv.head_dim;
  if (!need(env, layer < kv.layers, "kvWrite: layer out of range") ||
      !need(env, n_k >= row * n && n_v >= row * n, "kvWrite: k and v need n*kvHeads*headDim floats") ||
      !check_table(env, table, n_table, n_pages, pos0 + n))
    return env.Undefined();
  if (kRef) kv_write_ref(pages.p, kv, layer, table, (int)n_table, pos0, n, k, v);
  else kv_write(pages.p, kv, layer, table, (int)n_table, pos0, n, k, v, global_pool());
  return env.Undefined();
}

// attention(out, q, pages, layers, kvHeads, headDim, kvDtype, layer, heads, scale, tables, segs)
//   tables: Int32Array of all block tables back to back
//   segs:   Int32Array [tableOffset, tableLength, pos0, queries] per segment
template <bool kRef>
Napi::Value Attention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pages, n_tables, n_segs4;
  Bytes pages;
  KvLayout kv;
  int layer, heads;
  float scale;
  int32_t *tables, *segs;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_kv(info, 2, &pages, &kv, &n_pages) ||
      !get_int(info, 7, &layer, "layer") || !get_int(info, 8, &heads, "heads", 1) || !get_float(info, 9, &scale, "scale") ||
      !get_i32(info, 10, &tables, &n_tables, "tables") || !get_i32(info, 11, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "attention: layer out of range") ||
      !need(env, heads % kv.kv_heads == 0, "attention: heads must be a multiple of kvHeads"))
    return env.Undefined();
  std::vector<AttnSegment> sg;
  int rows = 0;
  if (!get_segments(env, "attention", tables, n_tables, segs, n_segs4, n_pages, &sg, &rows)) return env.Undefined();
  size_t need_f = (size_t)rows * heads * kv.head_dim;
  if (!need(env, n_out >= need_f && n_q >= need_f, "attention: q and out need Σqueries*heads*headDim floats"))
    return env.Undefined();
  if (kRef) attention_ref(out, q, pages.p, kv, layer, heads, scale, sg.data(), (int)sg.size());
  else active_kernels().attention(out, q, pages.p, kv, layer, heads, scale, sg.data(), (int)sg.size(), global_pool());
  return env.Undefined();
}

// MLA latent pages at [i..i+3]: pages, layers, width, kvDtype. Checks the pool size.
bool get_mla(const Napi::CallbackInfo& info, size_t i, Bytes* pages, MlaLayout* kv, size_t* n_pages) {
  Napi::Env env = info.Env();
  if (!get_bytes(info, i, pages, "pages") || !get_int(info, i + 1, &kv->layers, "layers", 1) ||
      !get_int(info, i + 2, &kv->width, "width", 1, 4096) || !get_int(info, i + 3, &kv->dtype, "kvDtype"))
    return false;
  if (!need(env, kv->dtype == F32 || kv->dtype == F16, "kv dtype must be 0 (F32) or 1 (F16)")) return false;
  size_t pb = kv->page_bytes();
  *n_pages = pb ? pages->n / pb : 0;
  return need(env, *n_pages > 0, "mla kv pool smaller than one page");
}

// mlaKvWrite(pages, layers, width, kvDtype, layer, blockTable, pos0, n, latent)
template <bool kRef>
Napi::Value MlaKvWrite(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  Bytes pages;
  MlaLayout kv;
  size_t n_pages, n_table, n_lat;
  int layer, pos0, n;
  int32_t* table;
  float* lat;
  if (!get_mla(info, 0, &pages, &kv, &n_pages) || !get_int(info, 4, &layer, "layer") ||
      !get_i32(info, 5, &table, &n_table, "blockTable") || !get_int(info, 6, &pos0, "pos0") || !get_int(info, 7, &n, "n") ||
      !get_f32(info, 8, &lat, &n_lat, "latent"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "mlaKvWrite: layer out of range") ||
      !need(env, n_lat >= (size_t)kv.width * n, "mlaKvWrite: latent needs n*width floats") ||
      !check_table(env, table, n_table, n_pages, pos0 + n))
    return env.Undefined();
  if (kRef) mla_kv_write_ref(pages.p, kv, layer, table, pos0, n, lat);
  else mla_kv_write(pages.p, kv, layer, table, pos0, n, lat, global_pool());
  return env.Undefined();
}

// mlaAttention(out, q, pages, layers, width, kvDtype, layer, heads, vDim, scale, tables, segs)
template <bool kRef>
Napi::Value MlaAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pages, n_tables, n_segs4;
  Bytes pages;
  MlaLayout kv;
  int layer, heads, v_dim;
  float scale;
  int32_t *tables, *segs;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_mla(info, 2, &pages, &kv, &n_pages) ||
      !get_int(info, 6, &layer, "layer") || !get_int(info, 7, &heads, "heads", 1) || !get_int(info, 8, &v_dim, "vDim", 1) ||
      !get_float(info, 9, &scale, "scale") || !get_i32(info, 10, &tables, &n_tables, "tables") ||
      !get_i32(info, 11, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "mlaAttention: layer out of range") ||
      !need(env, v_dim <= kv.width, "mlaAttention: vDim must be <= width"))
    return env.Undefined();
  std::vector<AttnSegment> sg;
  int rows = 0;
  if (!get_segments(env, "mlaAttention", tables, n_tables, segs, n_segs4, n_pages, &sg, &rows)) return env.Undefined();
  if (!need(env, n_q >= (size_t)rows * heads * kv.width, "mlaAttention: q needs Σqueries*heads*width floats") ||
      !need(env, n_out >= (size_t)rows * heads * v_dim, "mlaAttention: out needs Σqueries*heads*vDim floats"))
    return env.Undefined();
  if (kRef) mla_attention_ref(out, q, pages.p, kv, layer, heads, v_dim, scale, sg.data(), (int)sg.size());
  else mla_attention(out, q, pages.p, kv, layer, heads, v_dim, scale, sg.data(), (int)sg.size(), global_pool());
  return env.Undefined();
}

// dequantize(dst Float32Array, src bytes, dtype, count) / quantize(dst bytes, src Float32Array, dtype, count)
template <bool kQuantize>
Napi::Value Convert(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float* f;
  size_t n_f;
  Bytes b;
  int dtype, count;
  bool ok = kQuantize ? (get_bytes(info, 0, &b, "dst") && get_f32(info, 1, &f, &n_f, "src"))
                      : (get_f32(info, 0, &f, &n_f, "dst") && get_bytes(info, 1, &b, "src"));
  if (!ok || !get_int(info, 2, &dtype, "dtype") || !get_int(info, 3, &count, "count")) return env.Undefined();
  if (!check_convert_count(env, kQuantize ? "quantize" : "dequantize", dtype, (size_t)count) ||
      !need(env, n_f >= (size_t)count && b.n >= gguf_row_bytes(dtype, count), "buffers too small for count"))
    return env.Undefined();
  if (kQuantize && has_block_quantizer(dtype)) {
    // blocks quantize independently, so splitting across the pool keeps the bytes
    const BlockGeometry g = block_geometry(dtype);
    parallel_for(global_pool(), (size_t)count / g.elems, [&](size_t b0, size_t b1) {
      quantize(b.p + b0 * g.bytes, f + b0 * g.elems, dtype, (b1 - b0) * g.elems);
    }, 64);
  } else if (kQuantize) {
    quantize(b.p, f, dtype, count);
  } else {
    dequantize(f, b.p, dtype, count);
  }
  return env.Undefined();
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("abiVersion", Napi::Number::New(env, kAbiVersion));
  exports.Set("info", Napi::Function::New(env, Info));
  exports.Set("setIsa", Napi::Function::New(env, SetIsa));
  exports.Set("setThreads", Napi::Function::New(env, SetThreads));
  exports.Set("handoffNs", Napi::Function::New(env, HandoffNs));
  exports.Set("allocAligned", Napi::Function::New(env, AllocAligned));
  exports.Set("mmapFile", Napi::Function::New(env, MmapFile));
  exports.Set("unmapFile", Napi::Function::New(env, UnmapFile));
  exports.Set("packedWeightBytes", Napi::Function::New(env, PackedWeightBytes));
  exports.Set("packWeight", Napi::Function::New(env, PackWeight));
  exports.Set("matmul", Napi::Function::New(env, Matmul<false>));
  exports.Set("matmulRef", Napi::Function::New(env, Matmul<true>));
  exports.Set("rmsNorm", Napi::Function::New(env, RmsNorm<false>));
  exports.Set("rmsNormRef", Napi::Function::New(env, RmsNorm<true>));
  exports.Set("softmax", Napi::Function::New(env, Softmax<false>));
  exports.Set("softmaxRef", Napi::Function::New(env, Softmax<true>));
  exports.Set("swiglu", Napi::Function::New(env, Binary<false, true>));
  exports.Set("swigluRef", Napi::Function::New(env, Binary<true, true>));
  exports.Set("add", Napi::Function::New(env, Binary<false, false>));
  exports.Set("addRef", Napi::Function::New(env, Binary<true, false>));
  exports.Set("rope", Napi::Function::New(env, Rope<false>));
  exports.Set("ropeRef", Napi::Function::New(env, Rope<true>));
  exports.Set("embed", Napi::Function::New(env, Embed<false>));
  exports.Set("embedRef", Napi::Function::New(env, Embed<true>));
  exports.Set("kvWrite", Napi::Function::New(env, KvWrite<false>));
  exports.Set("kvWriteRef", Napi::Function::New(env, KvWrite<true>));
  exports.Set("attention", Napi::Function::New(env, Attention<false>));
  exports.Set("attentionRef", Napi::Function::New(env, Attention<true>));
  exports.Set("mlaKvWrite", Napi::Function::New(env, MlaKvWrite<false>));
  exports.Set("mlaKvWriteRef", Napi::Function::New(env, MlaKvWrite<true>));
  exports.Set("mlaAttention", Napi::Function::New(env, MlaAttention<false>));
  exports.Set("mlaAttentionRef", Napi::Function::New(env, MlaAttention<true>));
  exports.Set("dequantize", Napi::Function::New(env, Convert<false>));
  exports.Set("quantize", Napi::Function::New(env, Convert<true>));
  kvt::register_kv_codec(env, exports);  // kv-codec-napi.cc
  kvt::register_sampling(env, exports);  // sample-napi.cc
  kvt::register_xxh64(env, exports);     // xxh64-napi.cc
  kvt::register_aes_gcm(env, exports);   // aes-gcm-napi.cc
  kvt::register_window_ops(env, exports); // window-ops-napi.cc
  return exports;
}

}  // namespace

NODE_API_MODULE(kvtier_native, Init)
