// The two AES-256-GCM decryptions the native opens are built on, with one
// streaming shape (construct with key and nonce, aad once, update over the
// ciphertext in order in place — every piece but the last a multiple of 16
// bytes — then verify the tag): OpenSSL's EVP from the node binary (the
// reference, and the path on CPUs without VAES or with the ISA forced below
// avx512) and aes-gcm-vaes.cc's 512-bit code (node 20's OpenSSL 3.0 has no
// 512-bit GCM). Used by aes-gcm-napi.cc and aes-gcm-read-napi.cc.
#pragma once

#include <openssl/evp.h>

#include <climits>
#include <cstddef>
#include <cstdint>

#include "aes-gcm-vaes.h"

namespace kvt {

constexpr size_t KEY_BYTES = 32, NONCE_BYTES = 12, TAG_BYTES = 16;

class EvpOpen {
 public:
  EvpOpen(const uint8_t* key, const uint8_t* nonce) : ctx_(EVP_CIPHER_CTX_new()) {
    ok_ = ctx_ != nullptr && EVP_DecryptInit_ex(ctx_, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
          EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_IVLEN, (int)NONCE_BYTES, nullptr) == 1 && EVP_DecryptInit_ex(ctx_, nullptr, nullptr, key, nonce) == 1;
  }
  ~EvpOpen() { EVP_CIPHER_CTX_free(ctx_); }
  EvpOpen(const EvpOpen&) = delete;
  EvpOpen& operator=(const EvpOpen&) = delete;
  static constexpr size_t MAX_PIECE = (size_t)1 << 30;  // EVP counts in int
  void aad(const uint8_t* p, size_t n) {
    int out = 0;
    if (n > 0) ok_ = ok_ && n <= (size_t)INT_MAX && EVP_DecryptUpdate(ctx_, nullptr, &out, p, (int)n) == 1;
  }
  // GCM is a stream mode: out == in is allowed, and each call writes exactly what it read.
  void update(uint8_t* p, size_t n) {
    int out = 0;
    ok_ = ok_ && EVP_DecryptUpdate(ctx_, p, &out, p, (int)n) == 1 && out == (int)n;
  }
  bool verify(const uint8_t* tag) {
    uint8_t final_block[16];
    int out = 0;
    return ok_ && EVP_CIPHER_CTX_ctrl(ctx_, EVP_CTRL_GCM_SET_TAG, (int)TAG_BYTES, const_cast<uint8_t*>(tag)) == 1 && EVP_DecryptFinal_ex(ctx_, final_block, &out) > 0;
  }

 private:
  EVP_CIPHER_CTX* ctx_;
  bool ok_ = false;
};

struct VaesOpen : GcmVaesOpen {
  using GcmVaesOpen::GcmVaesOpen;
  static constexpr size_t MAX_PIECE = SIZE_MAX;
};

}  // namespace kvt
