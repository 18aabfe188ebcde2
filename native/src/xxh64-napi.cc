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

namespace kvt {
namespace {

constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
constexpr uint64_t P3 = 0x165667B19E3779F9ull;
constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;

inline uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
// Little-endian loads through memcpy: any alignment, no aliasing questions (x86-64 is LE).
inline uint64_t read64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
inline uint32_t read32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
inline uint64_t round1(uint64_t acc, uint64_t input) { return rotl(acc + input * P2, 31) * P1; }
inline uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ round1(0, v)) * P1 + P4; }

uint64_t xxh64(const uint8_t* p, size_t len, uint64_t seed) {
  const uint8_t* const end = p + len;
  uint64_t h;
  if (len >= 32) {
    // Four independent lanes over 32-byte stripes.
    uint64_t v1 = seed + P1 + P2, v2 = seed + P2, v3 = seed, v4 = seed - P1;
    const uint8_t* const limit = end - 32;
    do {
      v1 = round1(v1, read64(p));
      v2 = round1(v2, read64(p + 8));
      v3 = round1(v3, read64(p + 16));
      v4 = round1(v4, read64(p + 24));
      p += 32;
    } while (p <= limit);
    h = rotl(v1, 1) + rotl(v2, 7) + rotl(v3, 12) + rotl(v4, 18);
    h = merge(h, v1);
    h = merge(h, v2);
    h = merge(h, v3);
    h = merge(h, v4);
  } else {
    h = seed + P5;
  }
  h += (uint64_t)len;
  for (; p + 8 <= end; p += 8) h = rotl(h ^ round1(0, read64(p)), 27) * P1 + P4;
  if (p + 4 <= end) {
    h = rotl(h ^ ((uint64_t)read32(p) * P1), 23) * P2 + P3;
    p += 4;
  }
  for (; p < end; ++p) h = rotl(h ^ (*p * P5), 11) * P1;
  h ^= h >> 33;
  h *= P2;
  h ^= h >> 29;
  h *= P3;
  h ^= h >> 32;
  return h;
}

Napi::Value Xxh64(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  if (info.Length() != 2 || !info[0].IsTypedArray() || !info[1].IsBigInt()) {
    Napi::Error e = Napi::Error::New(env, "xxh64(bytes: Uint8Array, seed: bigint)");
    e.Set("code", Napi::String::New(env, "KVT_ERR_NATIVE_ARG"));
    e.ThrowAsJavaScriptException();
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
