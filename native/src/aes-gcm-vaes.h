// AES-256-GCM decryption with VAES + VPCLMULQDQ on 512-bit registers (16
// blocks = 256 bytes per loop turn: four zmm of counter blocks through the 14
// AES rounds while the same 256 ciphertext bytes are folded into GHASH).
// Why our own: node 20 bundles OpenSSL 3.0, whose GCM stops at 128-bit
// AES-NI (~3.2 GB/s here); its 512-bit VAES code arrived in 3.1. kvtier's
// sealed loads spend most of their extra CPU in this decryption.
//
// Streaming use (aes-gcm-napi.cc hashes each decrypted piece while hot):
//   GcmVaesOpen g(key[32], nonce[12]);  g.aad(aad, n);  // AAD once, first
//   g.update(p, n) ... over the ciphertext in order, in place; every piece
//   but the last a multiple of 16 bytes;  g.verify(tag[16]) → true = the tag
//   matched (constant-time compare). On false the caller zeroes the data.
// Only 96-bit nonces (what seal-envelope.ts writes). The reference twin is
// OpenSSL's EVP (open_in_place in aes-gcm-napi.cc, selected with the ISA
// forced below avx512) and node:crypto; test/native/aes-gcm.test.ts checks
// all three agree on every length class and refusal.
#pragma once

#include <cstddef>
#include <cstdint>

namespace kvt {

// True when this CPU runs the VAES path and the active kernel ISA is avx512
// (KVTIER_NATIVE_ISA=avx2|scalar or setIsa turns it off: the OpenSSL path).
bool gcm_vaes_usable();

class GcmVaesOpen {
 public:
  GcmVaesOpen(const uint8_t* key, const uint8_t* nonce);
  ~GcmVaesOpen();
  GcmVaesOpen(const GcmVaesOpen&) = delete;
  GcmVaesOpen& operator=(const GcmVaesOpen&) = delete;

  void aad(const uint8_t* p, size_t n);
  void update(uint8_t* p, size_t n);
  bool verify(const uint8_t* tag);

 private:
  // Round keys, then H^16..H^1 in GHASH's reflected form (times x^-1).
  alignas(64) uint8_t round_keys_[15 * 16];
  alignas(64) uint8_t h_powers_[16 * 16];
  alignas(16) uint8_t ghash_[16];  // running GHASH state, reflected form
  alignas(16) uint8_t j0_[16];     // nonce ‖ 1: its encryption masks the tag
  uint32_t counter_ = 2;           // the next data block's 32-bit counter
  uint64_t aad_bytes_ = 0, data_bytes_ = 0;
  bool finished_ = false;          // a piece not a multiple of 16 was the last
  bool misused_ = false;           // data came after that piece: verify refuses
};

}  // namespace kvt
