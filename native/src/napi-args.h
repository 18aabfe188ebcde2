// Argument parsing shared by every N-API binding (addon.cc and the *-napi.cc
// files): each reads a JS value into a pointer + length or a checked number,
// or throws a JS Error carrying `code` = KVT_ERR_NATIVE_<WHAT> and returns
// false, so a binding's body is a chain of `if (!get_…) return undefined`.
// Nothing here keeps a reference: pointers are valid for the call only.
#pragma once
#include <napi.h>

#include <cstddef>
#include <cstdint>
#include <string>

namespace kvt {

// Throws a JS Error with `code` set (the KVT_ERR_NATIVE_* registry entry).
void throw_code(Napi::Env env, const char* code, const std::string& msg);

// Throws KVT_ERR_NATIVE_SHAPE with msg unless ok; returns ok.
bool need(Napi::Env env, bool ok, const std::string& msg);

struct Bytes {
  uint8_t* p = nullptr;
  size_t n = 0;
};

// info[i] as bytes: an ArrayBuffer or any ArrayBufferView.
bool get_bytes(const Napi::CallbackInfo& info, size_t i, Bytes* out, const char* what);

// v's bytes when it is a typed array (of `type`, unless type is napi_typedarray_type(-1)); no throw.
bool typed_bytes(const Napi::Value& v, uint8_t** p, size_t* n, napi_typedarray_type type = (napi_typedarray_type)-1);

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

inline bool get_f32(const Napi::CallbackInfo& info, size_t i, float** p, size_t* n, const char* what) {
  return get_typed(info, i, napi_float32_array, p, n, what);
}
inline bool get_i32(const Napi::CallbackInfo& info, size_t i, int32_t** p, size_t* n, const char* what) {
  return get_typed(info, i, napi_int32_array, p, n, what);
}

// v as an integer in [lo, hi]; no throw.
bool whole_number(const Napi::Value& v, double lo, double hi, double* out);

// info[i] as an integer in [lo, hi], else KVT_ERR_NATIVE_ARG naming `what`.
bool get_int(const Napi::CallbackInfo& info, size_t i, int* out, const char* what, int lo = 0, int hi = 1 << 30);

// info[i] as a number, else KVT_ERR_NATIVE_ARG naming `what`.
bool get_float(const Napi::CallbackInfo& info, size_t i, float* out, const char* what);

// GGML type checks shared by the weight and conversion bindings.
bool check_convert_count(Napi::Env env, const char* what, int dtype, size_t count);
bool check_weight_shape(Napi::Env env, int dtype, int rows, int cols);

// A 64-byte-aligned buffer JS owns (freed by its finalizer); throws KVT_ERR_NATIVE_OOM.
Napi::ArrayBuffer external_aligned(Napi::Env env, size_t bytes);

}  // namespace kvt
