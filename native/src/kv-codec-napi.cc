// N-API bindings of the KV block codecs (ops/kv-codec.h), registered by
// addon.cc's Init. Every length is checked against the shape here, so a wrong
// shape from TypeScript is a thrown KVT_ERR_NATIVE_* error, never a stray write.
//   kvCodecBytes(codec, dtype, mla, layers, kvHeads, headDim, tokens) → stored bytes
//   kvEncode(dst, src, codec, dtype, mla, layers, kvHeads, headDim, tokens) → false if not encodable
//   kvDecode / kvDecodeRef(dst, src, codec, dtype, mla, layers, kvHeads, headDim, tokens)
#include <napi.h>

#include <string>

#include "napi-args.h"
#include "ops/kv-codec.h"

namespace kvt {
namespace {

bool shape_of(const Napi::CallbackInfo& info, size_t i, KvCodecShape* s) {
  int v[7];
  const char* names[7] = {"codec", "dtype", "mla", "layers", "kvHeads", "headDim", "tokens"};
  const int lo[7] = {1, 0, 0, 1, 1, 1, 1}, hi[7] = {3, 1, 1, 1 << 16, 1 << 16, 1 << 16, 1 << 20};
  for (int k = 0; k < 7; ++k) {
    double d;
    if (!whole_number(info[i + k], lo[k], hi[k], &d)) {
      throw_code(info.Env(), "KVT_ERR_NATIVE_ARG",
           std::string("kv codec: ") + names[k] + " must be an integer in [" + std::to_string(lo[k]) + ", " + std::to_string(hi[k]) + "]");
      return false;
    }
    v[k] = (int)d;
  }
  *s = KvCodecShape{v[0], v[1] == 0 ? F32 : F16, v[2] == 1, v[3], v[4], v[5], v[6]};
  if ((double)s->matrices() * s->matrix_values() * s->elem_bytes() > (double)(1ull << 40)) {
    throw_code(info.Env(), "KVT_ERR_NATIVE_SHAPE", "kv codec: block shape too large");
    return false;
  }
  return true;
}

Napi::Value CodecBytes(const Napi::CallbackInfo& info) {
  KvCodecShape s;
  if (!shape_of(info, 0, &s)) return info.Env().Undefined();
  return Napi::Number::New(info.Env(), (double)kv_codec_bytes(s));
}

// mode 0 encode, 1 decode, 2 decode_ref
template <int kMode>
Napi::Value Run(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t *dst, *src;
  size_t n_dst, n_src;
  if (!typed_bytes(info[0], &dst, &n_dst) || !typed_bytes(info[1], &src, &n_src)) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "kv codec: dst and src must be typed arrays");
    return env.Undefined();
  }
  KvCodecShape s;
  if (!shape_of(info, 2, &s)) return env.Undefined();
  const size_t raw = s.raw_bytes(), packed = kv_codec_bytes(s);
  const size_t want_dst = kMode == 0 ? packed : raw, want_src = kMode == 0 ? raw : packed;
  if (n_dst != want_dst || n_src != want_src) {
    throw_code(env, "KVT_ERR_NATIVE_SHAPE",
         std::string("kv codec: dst is ") + std::to_string(n_dst) + " bytes and src " + std::to_string(n_src) +
             "; this shape needs dst " + std::to_string(want_dst) + " and src " + std::to_string(want_src));
    return env.Undefined();
  }
  if (kMode == 0) return Napi::Boolean::New(env, kv_encode(dst, src, s));
  if (kMode == 1) kv_decode(dst, src, s);
  else kv_decode_ref(dst, src, s);
  return env.Undefined();
}

}  // namespace

void register_kv_codec(Napi::Env env, Napi::Object exports) {
  exports.Set("kvCodecBytes", Napi::Function::New(env, CodecBytes));
  exports.Set("kvEncode", Napi::Function::New(env, Run<0>));
  exports.Set("kvDecode", Napi::Function::New(env, Run<1>));
  exports.Set("kvDecodeRef", Napi::Function::New(env, Run<2>));
}

}  // namespace kvt
