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

void put_u64_be(uint8_t* out, uint64_t v) {
  for (int i = 7; i >= 0; --i, v >>= 8) out[i] = static_cast<uint8_t>(v);
}

// kvtier's prefix chain (src/kvtier/prefix-hasher.ts, chainInWasm is the twin):
//   key_i = XXH64(parent ‖ tokens_i, seedHi) ‖ XXH64(parent ‖ tokens_i, seedLo), each big-endian,
//   parent = key_{i-1} (root for i = 0), tokens_i = blockTokens u32 little-endian.
//   xxh64Chain(root: Uint8Array(16), tokens: Uint32Array, blockTokens, blockCount, seedHi, seedLo, out: Uint8Array(16 × blockCount))
// One call per request: the wasm path copies every token into wasm memory and crosses into wasm twice a block.
Napi::Value Xxh64Chain(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const char* usage = "xxh64Chain(root: Uint8Array(16), tokens: Uint32Array, blockTokens, blockCount, seedHi: bigint, seedLo: bigint, out: Uint8Array)";
  if (info.Length() != 7 || !info[0].IsTypedArray() || !info[1].IsTypedArray() || !info[2].IsNumber() || !info[3].IsNumber() || !info[4].IsBigInt() ||
      !info[5].IsBigInt() || !info[6].IsTypedArray()) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", usage);
    return env.Undefined();
  }
  auto root = info[0].As<Napi::TypedArray>();
  auto tokens = info[1].As<Napi::TypedArray>();
  auto out = info[6].As<Napi::TypedArray>();
  const int64_t blockTokens = info[2].As<Napi::Number>().Int64Value();
  const int64_t blockCount = info[3].As<Napi::Number>().Int64Value();
  if (root.ByteLength() != 16 || tokens.TypedArrayType() != napi_uint32_array || blockTokens < 1 || blockCount < 0 ||
      (blockCount > 0 && static_cast<uint64_t>(blockTokens) > tokens.ElementLength() / static_cast<uint64_t>(blockCount)) ||
      static_cast<uint64_t>(blockCount) > out.ByteLength() / 16) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", usage);
    return env.Undefined();
  }
  bool lossless = true;
  const uint64_t seedHi = info[4].As<Napi::BigInt>().Uint64Value(&lossless);
  const uint64_t seedLo = info[5].As<Napi::BigInt>().Uint64Value(&lossless);
  const uint8_t* parent = static_cast<const uint8_t*>(root.ArrayBuffer().Data()) + root.ByteOffset();
  const uint8_t* block = static_cast<const uint8_t*>(tokens.ArrayBuffer().Data()) + tokens.ByteOffset();
  uint8_t* key = static_cast<uint8_t*>(out.ArrayBuffer().Data()) + out.ByteOffset();
  const size_t blockBytes = static_cast<size_t>(blockTokens) * 4;
  for (int64_t i = 0; i < blockCount; ++i, block += blockBytes, key += 16) {
    Xxh64Stream hi(seedHi);
    Xxh64Stream lo(seedLo);
    hi.update(parent, 16);
    hi.update(block, blockBytes);
    lo.update(parent, 16);
    lo.update(block, blockBytes);
    put_u64_be(key, hi.digest());
    put_u64_be(key + 8, lo.digest());
    parent = key;
  }
  return env.Undefined();
}

}  // namespace

void register_xxh64(Napi::Env env, Napi::Object exports) {
  exports.Set("xxh64", Napi::Function::New(env, Xxh64));
  exports.Set("xxh64Chain", Napi::Function::New(env, Xxh64Chain));
}

}  // namespace kvt
