// XXH64 (xxHash spec) fed in pieces, for hashing a block while it is being
// produced in cache-sized chunks (aes-gcm-napi.cc hashes each decrypted 64 KiB
// piece while it is still hot). Same value as the one-shot xxh64 in
// xxh64-napi.cc for any split of the input (test/native/aes-gcm.test.ts
// checks the fused op against it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvt {

class Xxh64Stream {
 public:
  explicit Xxh64Stream(uint64_t seed) : seed_(seed), v1_(seed + P1 + P2), v2_(seed + P2), v3_(seed), v4_(seed - P1) {}

  void update(const uint8_t* p, size_t len) {
    total_ += len;
    if (buffered_ + len < 32) {
      std::memcpy(buf_ + buffered_, p, len);
      buffered_ += len;
      return;
    }
    if (buffered_ > 0) {
      const size_t fill = 32 - buffered_;
      std::memcpy(buf_ + buffered_, p, fill);
      stripe(buf_);
      p += fill;
      len -= fill;
      buffered_ = 0;
    }
    for (; len >= 32; p += 32, len -= 32) stripe(p);
    std::memcpy(buf_, p, len);
    buffered_ = len;
  }

  uint64_t digest() const {
    uint64_t h;
    if (total_ >= 32) {
      h = rotl(v1_, 1) + rotl(v2_, 7) + rotl(v3_, 12) + rotl(v4_, 18);
      h = merge(h, v1_);
      h = merge(h, v2_);
      h = merge(h, v3_);
      h = merge(h, v4_);
    } else {
      h = seed_ + P5;
    }
    h += total_;
    const uint8_t* p = buf_;
    const uint8_t* const end = buf_ + buffered_;
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

 private:
  static constexpr uint64_t P1 = 0x9E3779B185EBCA87ull;
  static constexpr uint64_t P2 = 0xC2B2AE3D27D4EB4Full;
  static constexpr uint64_t P3 = 0x165667B19E3779F9ull;
  static constexpr uint64_t P4 = 0x85EBCA77C2B2AE63ull;
  static constexpr uint64_t P5 = 0x27D4EB2F165667C5ull;
  static uint64_t rotl(uint64_t x, int r) { return (x << r) | (x >> (64 - r)); }
  static uint64_t read64(const uint8_t* p) { uint64_t v; std::memcpy(&v, p, 8); return v; }
  static uint32_t read32(const uint8_t* p) { uint32_t v; std::memcpy(&v, p, 4); return v; }
  static uint64_t round1(uint64_t acc, uint64_t input) { return rotl(acc + input * P2, 31) * P1; }
  static uint64_t merge(uint64_t acc, uint64_t v) { return (acc ^ round1(0, v)) * P1 + P4; }

  void stripe(const uint8_t* p) {
    v1_ = round1(v1_, read64(p));
    v2_ = round1(v2_, read64(p + 8));
    v3_ = round1(v3_, read64(p + 16));
    v4_ = round1(v4_, read64(p + 24));
  }

  uint64_t seed_, v1_, v2_, v3_, v4_;
  uint64_t total_ = 0;
  uint8_t buf_[32];
  size_t buffered_ = 0;
};

}  // namespace kvt
