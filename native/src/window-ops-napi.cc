// N-API bindings of ops/window-attention.h (sliding-window attention, geglu,
// scale), registered by addon.cc's Init. Every pointer and length is checked
// here, so a wrong shape from TypeScript is a thrown KVT_ERR_NATIVE_ARG /
// KVT_ERR_NATIVE_SHAPE, never a stray read or write.
//   windowAttention / windowAttentionRef(out, q, pages, layers, kvHeads, headDim, kvDtype, layer, heads, scale,
//                                        window, tables, segs[, sinks])   (attention's arguments plus window; 0 = none;
//                                        sinks: optional Float32Array [heads], gpt-oss's attention sinks)
//   geglu / gegluRef(out, gate, up, n)
//   scale / scaleRef(out, x, s, n)
#include <napi.h>

#include <string>
#include <vector>

#include "kv-args.h"
#include "napi-args.h"
#include "ops/window-attention.h"

namespace kvt {
namespace {

template <bool kRef>
Napi::Value WindowAttention(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *q;
  size_t n_out, n_q, n_pages, n_tables, n_segs4;
  Bytes pages;
  KvLayout kv;
  int layer, heads, window;
  float sc;
  int32_t *tables, *segs;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &q, &n_q, "q") || !get_kv(info, 2, &pages, &kv, &n_pages) ||
      !get_int(info, 7, &layer, "layer") || !get_int(info, 8, &heads, "heads", 1) || !get_float(info, 9, &sc, "scale") ||
      !get_int(info, 10, &window, "window") || !get_i32(info, 11, &tables, &n_tables, "tables") ||
      !get_i32(info, 12, &segs, &n_segs4, "segments"))
    return env.Undefined();
  if (!need(env, layer < kv.layers, "windowAttention: layer out of range") ||
      !need(env, heads % kv.kv_heads == 0, "windowAttention: heads must be a multiple of kvHeads"))
    return env.Undefined();
  std::vector<AttnSegment> sg;
  int rows = 0;
  if (!get_segments(env, "windowAttention", tables, n_tables, segs, n_segs4, n_pages, &sg, &rows)) return env.Undefined();
  const size_t need_f = (size_t)rows * heads * kv.head_dim;
  if (!need(env, n_out >= need_f && n_q >= need_f, "windowAttention: q and out need Σqueries*heads*headDim floats")) return env.Undefined();
  float* sinks = nullptr;
  if (info.Length() > 13 && !info[13].IsUndefined() && !info[13].IsNull()) {
    size_t n_sinks;
    if (!get_f32(info, 13, &sinks, &n_sinks, "sinks")) return env.Undefined();
    if (!need(env, n_sinks == (size_t)heads, "windowAttention: sinks need one float per head")) return env.Undefined();
  }
  if (kRef) window_attention_ref(out, q, pages.p, kv, layer, heads, sc, window, sg.data(), (int)sg.size(), sinks);
  else window_attention(out, q, pages.p, kv, layer, heads, sc, window, sg.data(), (int)sg.size(), global_pool(), sinks);
  return env.Undefined();
}

template <bool kRef>
Napi::Value Geglu(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  float *out, *gate, *up;
  size_t n_out, n_gate, n_up;
  int n;
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &gate, &n_gate, "gate") ||
      !get_f32(info, 2, &up, &n_up, "up") || !get_int(info, 3, &n, "n"))
    return env.Undefined();
  if (!need(env, n_out >= (size_t)n && n_gate >= (size_t)n && n_up >= (size_t)n, "geglu: out, gate and up need n floats")) return env.Undefined();
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
  if (!get_f32(info, 0, &out, &n_out, "out") || !get_f32(info, 1, &x, &n_x, "x") ||
      !get_float(info, 2, &s, "s") || !get_int(info, 3, &n, "n"))
    return env.Undefined();
  if (!need(env, n_out >= (size_t)n && n_x >= (size_t)n, "scale: out and x need n floats")) return env.Undefined();
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
