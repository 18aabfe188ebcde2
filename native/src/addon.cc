// N-API entry point of the kvtier compute core: the runtime controls (ISA,
// threads) and Init, which registers each op family's bindings from its own
// *-napi.cc file. Arguments are parsed by napi-args.h everywhere, so every
// pointer+length from JS is checked before a kernel sees it and a wrong shape
// from TypeScript is a thrown error (`code` = KVT_ERR_NATIVE_<WHAT>), never a
// stray write.
#include <napi.h>

#include <string>

#include "dispatch.h"
#include "napi-args.h"
#include "thread-pool.h"

using namespace kvt;

namespace kvt {
void register_memory(Napi::Env env, Napi::Object exports);       // memory-napi.cc
void register_weights(Napi::Env env, Napi::Object exports);      // weights-napi.cc
void register_elementwise(Napi::Env env, Napi::Object exports);  // elementwise-napi.cc
void register_attention(Napi::Env env, Napi::Object exports);    // attention-napi.cc
void register_kv_codec(Napi::Env env, Napi::Object exports);     // kv-codec-napi.cc
void register_sampling(Napi::Env env, Napi::Object exports);     // sample-napi.cc
void register_xxh64(Napi::Env env, Napi::Object exports);        // xxh64-napi.cc
void register_aes_gcm(Napi::Env env, Napi::Object exports);      // aes-gcm-napi.cc
void register_window_ops(Napi::Env env, Napi::Object exports);   // window-ops-napi.cc
void register_dsv4_ops(Napi::Env env, Napi::Object exports);     // dsv4-napi.cc
void register_dsv4_rows(Napi::Env env, Napi::Object exports);    // dsv4-rows-napi.cc
void register_fs_batch(Napi::Env env, Napi::Object exports);     // fs-batch-napi.cc
}

namespace {

constexpr int kAbiVersion = 2;

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

Napi::Value ParkThreads(const Napi::CallbackInfo& info) {
  global_pool().park();
  return info.Env().Undefined();
}

Napi::Value HandoffNs(const Napi::CallbackInfo& info) {
  int iters;
  if (!get_int(info, 0, &iters, "iterations", 1, 100000000)) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), measure_handoff_ns(global_pool(), iters));
}

Napi::Object Init(Napi::Env env, Napi::Object exports) {
  exports.Set("abiVersion", Napi::Number::New(env, kAbiVersion));
  exports.Set("info", Napi::Function::New(env, Info));
  exports.Set("setIsa", Napi::Function::New(env, SetIsa));
  exports.Set("setThreads", Napi::Function::New(env, SetThreads));
  exports.Set("handoffNs", Napi::Function::New(env, HandoffNs));
  exports.Set("parkThreads", Napi::Function::New(env, ParkThreads));
  kvt::register_memory(env, exports);       // memory-napi.cc
  kvt::register_weights(env, exports);      // weights-napi.cc
  kvt::register_elementwise(env, exports);  // elementwise-napi.cc
  kvt::register_attention(env, exports);    // attention-napi.cc
  kvt::register_kv_codec(env, exports);     // kv-codec-napi.cc
  kvt::register_sampling(env, exports);     // sample-napi.cc
  kvt::register_xxh64(env, exports);        // xxh64-napi.cc
  kvt::register_aes_gcm(env, exports);      // aes-gcm-napi.cc
  kvt::register_window_ops(env, exports);   // window-ops-napi.cc
  kvt::register_dsv4_ops(env, exports);     // dsv4-napi.cc
  kvt::register_dsv4_rows(env, exports);    // dsv4-rows-napi.cc
  kvt::register_fs_batch(env, exports);     // fs-batch-napi.cc
  return exports;
}

}  // namespace

NODE_API_MODULE(kvtier_native, Init)
