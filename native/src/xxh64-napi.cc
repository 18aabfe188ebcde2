// xxh64 (XXH64 of the xxHash spec, seed as given) over a typed array's bytes
// in place, for kvtier's block checksums: the wasm hash kvtier used first
// must copy every block (≈1 MiB) into wasm memory before hashing it; this
// reads the caller's buffer where it is. Registered by addon.cc's Init.
//   xxh64(bytes: Uint8Array, seed: bigint) → bigint (unsigned 64-bit)
// The reference it is tested against is xxhash-wasm's h64Raw (an independent
// implementation of the same spec): equal on every length and seed.
#include <napi.h>

#include <cstdint>
#include <cstring>

#include "napi-args.h"
#include "xxh64-stream.h"

namespace kvt {
namespace {

// One-shot is the stream fed once: one copy of the XXH64 rounds (xxh64-stream.h).
uint64_t xxh64(const uint8_t* p, size_t len, uint64_t seed) {
  Xxh64Stream stream(seed);
  stream.update(p, len);
  return stream.digest();
}

Napi::Value Xxh64(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 2 || !info[0].IsTypedArray() || !info[1].IsBigInt()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "xxh64(bytes: Uint8Array, seed: bigint)");
    return env.Undefined();
  }
  auto ta = info[0].As<Napi::TypedArray>();
  const uint8_t* data = static_cast<const uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  bool lossless = true;
  const uint64_t seed = info[1].As<Napi::BigInt>().Uint64Value(&lossless);
  return Napi::BigInt::New(env, xxh64(data, ta.ByteLength(), seed));
}

}  // namespace

void register_xxh64(Napi::Env env, Napi::Object exports) {
  exports.Set("xxh64", Napi::Function::New(env, Xxh64));
}

}  // namespace kvt
