// N-API bindings of ops/window-attention.h (sliding-window attention, geglu,
// scale), registered by addon.cc's Init. Every pointer and length is checked
// here, so a wrong shape from TypeScript is a thrown KVT_ERR_NATIVE_ARG /
// KVT_ERR_NATIVE_SHAPE, never a stray read or write.
//   windowAttention / windowAttentionRef(out, q, pages, layers, kvHeads, headDim, kvDtype, layer, heads, scale,
//                                        window, tables, segs)   (attention's arguments plus window; 0 = none)
//   geglu / gegluRef(out, gate, up, n)
//   scale / scaleRef(out, x, s, n)
#include <napi.h>

#include <string>
#include <vector>

#include "ops/window-attention.h"

namespace kvt {
namespace {

bool fail(Napi::Env env, const char* code, const std::string& msg) {
  Napi::Error e = Napi::Error::New(env, msg);
  e.Set("code", Napi::String::New(env, code));
  e.ThrowAsJavaScriptException();
  return false;
}

template <typename T>
bool typed(const Napi::CallbackInfo& info, size_t i, napi_typedarray_type type, T** p, size_t* n, const char* what) {
  if (i >= info.Length() || !info[i].IsTypedArray() || info[i].As<Napi::TypedArray>().TypedArrayType() != type)
    return fail(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + (type == napi_float32_array ? ": expected a Float32Array" : ": expected an Int32Array"));
  auto ta = info[i].As<Napi::TypedArray>();
  *p = reinterpret_cast<T*>(static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset());
  *n = ta.ElementLength();
  return true;
}

bool bytes(const Napi::CallbackInfo& info, size_t i, uint8_t** p, size_t* n) {
  if (i < info.Length() && info[i].IsArrayBuffer()) {
    auto ab = info[i].As<Napi::ArrayBuffer>();
    *p = static_cast<uint8_t*>(ab.Data());
    *n = ab.ByteLength();
    return true;
  }
  if (i < info.Length() && info[i].IsTypedArray()) {
    auto ta = info[i].As<Napi::TypedArray>();
    *p = static_cast<uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
    *n = ta.ByteLength();
    return true;
  }
  return fail(info.Env(), "KVT_ERR_NATIVE_ARG", "pages: expected an ArrayBuffer or typed array");
}

bool integer(const Napi::CallbackInfo& info, size_t i, int* out, const char* what, int lo = 0, int hi = 1 << 30) {
  if (i >= info.Length() || !info[i].IsNumber()) return fail(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an integer");
  const double d = info[i].As<Napi::Number>().DoubleValue();
  if (d != (double)(int64_t)d || d < lo || d > hi)
    return fail(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
  *out = (int)d;
  return true;
}

bool number(const Napi::CallbackInfo& info, size_t i, float* out, const char* what) {
  if (i >= info.Length() || !info[i].IsNumber()) return fail(info.Env(), "KVT_ERR_NATIVE_ARG", std::string(what) + ": expected a number");
  *out = (float)info[i].As<Napi::Number>().DoubleValue();
  return true;
}

bool shape(Napi::Env env, bool ok, const std::string& msg) { return ok || fail(env, "KVT_ERR_NATIVE_SHAPE", msg); }

template <bool kRef>
Napi::Value WindowAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pool, n_tables, n_segs4;
  uint8_t* pages;
  KvLayout kv;
  int layer, heads, window;
  float sc;
  int32_t *tables, *segs;
  if (!typed(info, 0, napi_float32_array, &out, &n_out, "out") || !typed(info, 1, napi_float32_array, &q, &n_q, "q") ||
      !bytes(info, 2, &pages, &n_pool) || !integer(info, 3, &kv.layers, "layers", 1) || !integer(info, 4, &kv.kv_heads, "kvHeads", 1) ||
      !integer(info, 5, &kv.head_dim, "headDim", 1, 256) || !integer(info, 6, &kv.dtype, "kvDtype") ||
      !integer(info, 7, &layer, "layer") || !integer(info, 8, &heads, "heads", 1) || !number(info, 9, &sc, "scale") ||
      !integer(info, 10, &window, "window") || !typed(info, 11, napi_int32_array, &tables, &n_tables, "tables") ||
      !typed(info, 12, napi_int32_array, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!shape(env, kv.dtype == F32 || kv.dtype == F16, "kv dtype must be 0 (F32) or 1 (F16)") ||
      !shape(env, layer < kv.layers, "windowAttention: layer out of range") ||
      !shape(env, heads % kv.kv_heads == 0, "windowAttention: heads must be a multiple of kvHeads") ||
      !shape(env, n_segs4 % 4 == 0, "windowAttention: segments must hold 4 ints per segment"))
    return env.Undefined();
  const size_t n_pages = n_pool / kv.page_bytes();
  if (!shape(env, n_pages > 0, "kv pool smaller than one page")) return env.Undefined();
  std::vector<AttnSegment> sg(n_segs4 / 4);
  int rows = 0;
  for (size_t s = 0; s < sg.size(); ++s) {
    const int off = segs[s * 4], len = segs[s * 4 + 1], pos0 = segs[s * 4 + 2], nq = segs[s * 4 + 3];
    if (!shape(env, off >= 0 && len >= 0 && (size_t)off + len <= n_tables && pos0 >= 0 && nq >= 0,
               "windowAttention: segment " + std::to_string(s) + " has a bad table range, pos0 or query count"))
      return env.Undefined();
    const size_t blocks = ((size_t)pos0 + nq + kPageTokens - 1) / kPageTokens;
    if (!shape(env, (size_t)len >= blocks, "windowAttention: block table shorter than the positions need")) return env.Undefined();
    for (size_t b = 0; b < blocks; ++b)
      if (!shape(env, tables[off + b] >= 0 && (size_t)tables[off + b] < n_pages, "windowAttention: block table entry out of range"))
        return env.Undefined();
    sg[s] = AttnSegment{tables + off, len, pos0, nq, rows};
    rows += nq;
  }
  const size_t need_f = (size_t)rows * heads * kv.head_dim;
  if (!shape(env, n_out >= need_f && n_q >= need_f, "windowAttention: q and out need Σqueries*heads*headDim floats")) return env.Undefined();
  if (kRef) window_attention_ref(out, q, pages, kv, layer, heads, sc, window, sg.data(), (int)sg.size());
  else window_attention(out, q, pages, kv, layer, heads, sc, window, sg.data(), (int)sg.size(), global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value Geglu(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *gate, *up;
  size_t n_out, n_gate, n_up;
  int n;
  if (!typed(info, 0, napi_float32_array, &out, &n_out, "out") || !typed(info, 1, napi_float32_array, &gate, &n_gate, "gate") ||
      !typed(info, 2, napi_float32_array, &up, &n_up, "up") || !integer(info, 3, &n, "n"))
    return env.Undefined();
  if (!shape(env, n_out >= (size_t)n && n_gate >= (size_t)n && n_up >= (size_t)n, "geglu: out, gate and up need n floats")) return env.Undefined();
  if (kRef) geglu_ref(out, gate, up, (size_t)n);
  else geglu(out, gate, up, (size_t)n, global_pool());
  return env.Undefined();
}

template <bool kRef>
Napi::Value Scale(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *x;
  size_t n_out, n_x;
  float s;
  int n;
  if (!typed(info, 0, napi_float32_array, &out, &n_out, "out") || !typed(info, 1, napi_float32_array, &x, &n_x, "x") ||
      !number(info, 2, &s, "s") || !integer(info, 3, &n, "n"))
    return env.Undefined();
  if (!shape(env, n_out >= (size_t)n && n_x >= (size_t)n, "scale: out and x need n floats")) return env.Undefined();
  if (kRef) scale_ref(out, x, s, (size_t)n);
  else scale(out, x, s, (size_t)n, global_pool());
  return env.Undefined();
}

}  // namespace

void register_window_ops(Napi::Env env, Napi::Object exports) {
  exports.Set("windowAttention", Napi::Function::New(env, WindowAttention<false>));
  exports.Set("windowAttentionRef", Napi::Function::New(env, WindowAttention<true>));
  exports.Set("geglu", Napi::Function::New(env, Geglu<false>));
  exports.Set("gegluRef", Napi::Function::New(env, Geglu<true>));
  exports.Set("scale", Napi::Function::New(env, Scale<false>));
  exports.Set("scaleRef", Napi::Function::New(env, Scale<true>));
}

}  // namespace kvt
