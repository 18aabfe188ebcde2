// AES-256-GCM open in place on libuv's thread pool, for kvtier's sealed
// blocks (src/kvtier/seal/): one pass over the buffer the load path read
// into, off the JavaScript thread, so a load's decryptions overlap its reads
// and checksums. Two implementations of the same cipher:
//  - aes-gcm-vaes.cc: 512-bit VAES + VPCLMULQDQ, ~12 GB/s per core here,
//    used when the CPU has them and the active kernel ISA is avx512;
//  - OpenSSL's EVP from the node binary (its exported symbols, headers from
//    node's include dir; node 20 bundles 3.0: 128-bit AES-NI, ~3.2 GB/s),
//    everywhere else, and the reference the VAES code is tested against.
// node:crypto's decipher runs that OpenSSL on the calling thread.
//
//   aesGcmOpenPath() → 'vaes-avx512' | 'openssl'   which one opens now
//   aesGcmOpenInPlaceSync(data, key, nonce, aad, tag) → boolean
//   as aesGcmOpenInPlace, on the calling thread.
//
//   aesGcmOpenInPlace(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12),
//                     aad: Uint8Array, tag: Uint8Array(16)) → Promise<boolean>
//   data: ciphertext → plaintext, in place. true = the tag verified;
//   false = it did not, and data has been zeroed (no unauthenticated plaintext
//   is ever left behind). The caller must not touch `data` until it settles.
// Reference: node:crypto createDecipheriv('aes-256-gcm') (an independent
// path through the same spec), test/native/aes-gcm.test.ts: same plaintext,
// same refusals.
#include "aes-gcm-open.h"
#include "napi-args.h"

#include <napi.h>
#include <openssl/crypto.h>
#include <openssl/evp.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <vector>

namespace kvt {
namespace {

// Decrypts len bytes at data in place; true when the tag verifies.
template <class Open>
bool open_in_place_with(uint8_t* data, size_t len, const uint8_t* key, const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* tag) {
  Open open(key, nonce);
  open.aad(aad, aad_len);
  for (size_t at = 0; at < len;) {
    const size_t piece = std::min<size_t>(len - at, Open::MAX_PIECE);
    open.update(data + at, piece);
    at += piece;
  }
  return open.verify(tag);
}

bool open_in_place(bool vaes, uint8_t* data, size_t len, const uint8_t* key, const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* tag) {
  return vaes ? open_in_place_with<VaesOpen>(data, len, key, nonce, aad, aad_len, tag) : open_in_place_with<EvpOpen>(data, len, key, nonce, aad, aad_len, tag);
}

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, Napi::TypedArray data, std::vector<uint8_t> secret, std::vector<uint8_t> aad, bool vaes)
      : Napi::AsyncWorker(env),
        vaes_(vaes),
        deferred_(Napi::Promise::Deferred::New(env)),
        data_ref_(Napi::Persistent(data.As<Napi::Object>())),
        data_(static_cast<uint8_t*>(data.ArrayBuffer().Data()) + data.ByteOffset()),
        len_(data.ByteLength()),
        secret_(std::move(secret)),
        aad_(std::move(aad)) {}

  ~OpenWorker() override { OPENSSL_cleanse(secret_.data(), secret_.size()); }

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    const uint8_t* s = secret_.data();
    verified_ = open_in_place(vaes_, data_, len_, s, s + KEY_BYTES, aad_.data(), aad_.size(), s + KEY_BYTES + NONCE_BYTES);
    if (!verified_) std::memset(data_, 0, len_);
  }

  void OnOK() override { deferred_.Resolve(Napi::Boolean::New(Env(), verified_)); }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  bool vaes_;  // chosen on the JS thread, where the ISA is switched
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference data_ref_;  // keeps the buffer alive while the pool thread writes it
  uint8_t* data_;
  size_t len_;
  std::vector<uint8_t> secret_;  // key ‖ nonce ‖ tag
  std::vector<uint8_t> aad_;
  bool verified_ = false;
};

// A Uint8Array of exactly `want` bytes (any length when want is 0).
bool bytes_of(const Napi::Value& v, size_t want, const uint8_t** p, size_t* n) {
  uint8_t* q;
  if (!typed_bytes(v, &q, n, napi_uint8_array) || (want != 0 && *n != want)) return false;
  *p = q;
  return true;
}

Napi::Value AesGcmOpenInPlace(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t *data, *key, *nonce, *aad, *tag;
  size_t data_len, key_len, nonce_len, aad_len, tag_len;
  if (!(info.Length() == 5u && bytes_of(info[0], 0, &data, &data_len) && bytes_of(info[1], KEY_BYTES, &key, &key_len) &&
        bytes_of(info[2], NONCE_BYTES, &nonce, &nonce_len) && bytes_of(info[3], 0, &aad, &aad_len) && bytes_of(info[4], TAG_BYTES, &tag, &tag_len))) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "aesGcmOpenInPlace(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12), aad: Uint8Array, tag: Uint8Array(16))");
    return env.Undefined();
  }
  std::vector<uint8_t> secret(KEY_BYTES + NONCE_BYTES + TAG_BYTES);
  std::memcpy(secret.data(), key, KEY_BYTES);
  std::memcpy(secret.data() + KEY_BYTES, nonce, NONCE_BYTES);
  std::memcpy(secret.data() + KEY_BYTES + NONCE_BYTES, tag, TAG_BYTES);
  auto* worker = new OpenWorker(env, info[0].As<Napi::TypedArray>(), std::move(secret), std::vector<uint8_t>(aad, aad + aad_len), gcm_vaes_usable());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

// The same open on the calling thread: for the 512-bit path a 768 KiB block
// takes ~65 µs, less than a hop to the pool and back costs on a busy box.
Napi::Value AesGcmOpenInPlaceSync(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t *data, *key, *nonce, *aad, *tag;
  size_t data_len, key_len, nonce_len, aad_len, tag_len;
  if (!(info.Length() == 5u && bytes_of(info[0], 0, &data, &data_len) && bytes_of(info[1], KEY_BYTES, &key, &key_len) &&
        bytes_of(info[2], NONCE_BYTES, &nonce, &nonce_len) && bytes_of(info[3], 0, &aad, &aad_len) && bytes_of(info[4], TAG_BYTES, &tag, &tag_len))) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "aesGcmOpenInPlaceSync(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12), aad: Uint8Array, tag: Uint8Array(16))");
    return env.Undefined();
  }
  uint8_t* out = const_cast<uint8_t*>(data);
  const bool verified = open_in_place(gcm_vaes_usable(), out, data_len, key, nonce, aad, aad_len, tag);
  if (!verified) std::memset(out, 0, data_len);
  return Napi::Boolean::New(env, verified);
}

}  // namespace

void register_aes_gcm_read(Napi::Env env, Napi::Object exports);  // aes-gcm-read-napi.cc

void register_aes_gcm(Napi::Env env, Napi::Object exports) {
  register_aes_gcm_read(env, exports);
  exports.Set("aesGcmOpenPath", Napi::Function::New(env, [](const Napi::CallbackInfo& info) -> Napi::Value {
    return Napi::String::New(info.Env(), gcm_vaes_usable() ? "vaes-avx512" : "openssl");
  }));
  exports.Set("aesGcmOpenInPlace", Napi::Function::New(env, AesGcmOpenInPlace));
  exports.Set("aesGcmOpenInPlaceSync", Napi::Function::New(env, AesGcmOpenInPlaceSync));
}

}  // namespace kvt
