// N-API binding of the sampler's draw (ops/sample-masked.h), registered by
// addon.cc's Init. Lengths and parameters are checked here, so a bad call is a
// thrown KVT_ERR_NATIVE_ARG, never a stray read.
//   sampleMasked / sampleMaskedRef(logits: Float32Array, mask: Uint32Array | null, invTemp, topK, topP, uHi, uLo)
//     → token id, or -1 when the mask allows no id below logits.length
#include <napi.h>

#include <algorithm>
#include <cmath>
#include <string>

#include "napi-args.h"
#include "ops/sample-masked.h"

namespace kvt {
namespace {

void fail(Napi::Env env, const std::string& msg) { throw_code(env, "KVT_ERR_NATIVE_ARG", msg); }

template <bool kRef>
Napi::Value Sample(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() < 7 || !info[0].IsTypedArray() || info[0].As<Napi::TypedArray>().TypedArrayType() != napi_float32_array) {
    fail(env, "sampleMasked: logits must be a Float32Array (then mask, invTemp, topK, topP, uHi, uLo)");
    return env.Undefined();
  }
  auto lt = info[0].As<Napi::TypedArray>();
  const float* x = reinterpret_cast<const float*>(static_cast<uint8_t*>(lt.ArrayBuffer().Data()) + lt.ByteOffset());
  const size_t n = lt.ElementLength();
  if (n == 0 || n > (size_t)1 << 30) {
    fail(env, "sampleMasked: logits must hold 1 .. 2^30 values");
    return env.Undefined();
  }
  const uint32_t* mask = nullptr;
  if (!info[1].IsNull() && !info[1].IsUndefined()) {
    if (!info[1].IsTypedArray() || info[1].As<Napi::TypedArray>().TypedArrayType() != napi_uint32_array) {
      fail(env, "sampleMasked: mask must be a Uint32Array or null");
      return env.Undefined();
    }
    auto mt = info[1].As<Napi::TypedArray>();
    if (mt.ElementLength() < (n + 31) / 32) {
      fail(env, "sampleMasked: mask needs ceil(logits.length / 32) words");
      return env.Undefined();
    }
    mask = reinterpret_cast<const uint32_t*>(static_cast<uint8_t*>(mt.ArrayBuffer().Data()) + mt.ByteOffset());
  }
  double v[5];
  for (int k = 0; k < 5; ++k) {
    if (!info[2 + k].IsNumber()) {
      fail(env, "sampleMasked: invTemp, topK, topP, uHi and uLo must be numbers");
      return env.Undefined();
    }
    v[k] = info[2 + k].As<Napi::Number>().DoubleValue();
  }
  const bool ok = std::isfinite(v[0]) && v[0] > 0 && v[1] >= 0 && v[1] <= 2147483647.0 && v[1] == std::floor(v[1]) && v[2] > 0 &&
                  v[2] <= 1 && v[3] >= 0 && v[3] < 4294967296.0 && v[3] == std::floor(v[3]) && v[4] >= 0 && v[4] < 4294967296.0 &&
                  v[4] == std::floor(v[4]);
  if (!ok) {
    fail(env, "sampleMasked: invTemp must be finite and > 0, topK an integer ≥ 0, topP in (0, 1], uHi/uLo 32-bit unsigned integers");
    return env.Undefined();
  }
  // invTemp past f32's range stays finite (the same law: only the maxima keep weight), never inf · 0 = NaN.
  SampleParams p{(float)std::min(v[0], 3.4028234663852886e38), (int)v[1], v[2], ((uint64_t)v[3] << 32) | (uint64_t)v[4]};
  const int32_t token = kRef ? sample_masked_ref(x, mask, (int)n, p) : sample_masked(x, mask, (int)n, p);
  return Napi::Number::New(env, token);
}

}  // namespace

void register_sampling(Napi::Env env, Napi::Object exports) {
  exports.Set("sampleMasked", Napi::Function::New(env, Sample<false>));
  exports.Set("sampleMaskedRef", Napi::Function::New(env, Sample<true>));
}

}  // namespace kvt
