// AES-256-GCM open in place on libuv's thread pool, for kvtier's sealed
// blocks (src/kvtier/seal/): one OpenSSL EVP pass (AES-NI/VAES, the speed of
// `openssl speed -evp aes-256-gcm`) over the buffer the load path read into,
// off the JavaScript thread, so a load's decryptions overlap its reads and
// checksums. node:crypto's decipher runs the same OpenSSL on the calling
// thread in 64 KiB update calls; this is the same cipher, one call, elsewhere.
// OpenSSL comes from the node binary itself (its exported symbols, headers
// from node's include dir): no library of our own to link or keep updated.
//
//   aesGcmOpenInPlace(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12),
//                     aad: Uint8Array, tag: Uint8Array(16)) → Promise<boolean>
//   data: ciphertext → plaintext, in place. true = the tag verified;
//   false = it did not, and data has been zeroed (no unauthenticated plaintext
//   is ever left behind). The caller must not touch `data` until it settles.
//
//   aesGcmOpenHashInPlace(data, key, nonce, aad, tag, offsetField: number, seed: bigint) → Promise<bigint | null>
//   the same open, decrypting in 64 KiB pieces and hashing each piece while it
//   is hot: XXH64(seed) of data[from, end) with from = the u32 LE at
//   data[offsetField] (once decrypted; clamped to the length). A block file's
//   payload offset is its u32 at 16 and the payload runs to the end, so this
//   is the block's payload checksum without the loading thread reading the
//   payload again. null = the tag did not verify (data zeroed, hash dropped).
// Reference: node:crypto createDecipheriv('aes-256-gcm') (an independent
// path through the same spec) and the one-shot xxh64, test/native/aes-gcm.test.ts:
// same plaintext, same hash, same refusals.
#include "xxh64-stream.h"

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

constexpr size_t KEY_BYTES = 32, NONCE_BYTES = 12, TAG_BYTES = 16;
// Small enough to stay in L2 between decrypting a piece and hashing it.
constexpr size_t PIECE_BYTES = 64 * 1024;

// Optional: hash data[u32 at field, end) as it is decrypted.
struct TailHash {
  int64_t field = -1;  // -1: no hash
  uint64_t seed = 0;
  uint64_t value = 0;
};

// Decrypts len bytes at data in place; true when the tag verifies.
bool open_in_place(uint8_t* data, size_t len, const uint8_t* key, const uint8_t* nonce, const uint8_t* aad, size_t aad_len, const uint8_t* tag, TailHash* tail) {
  EVP_CIPHER_CTX* ctx = EVP_CIPHER_CTX_new();
  if (ctx == nullptr) return false;
  int out = 0;
  bool ok = EVP_DecryptInit_ex(ctx, EVP_aes_256_gcm(), nullptr, nullptr, nullptr) == 1 &&
            EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_IVLEN, (int)NONCE_BYTES, nullptr) == 1 &&
            EVP_DecryptInit_ex(ctx, nullptr, nullptr, key, nonce) == 1;
  if (ok && aad_len > 0) ok = aad_len <= (size_t)INT_MAX && EVP_DecryptUpdate(ctx, nullptr, &out, aad, (int)aad_len) == 1;
  // GCM is a stream mode: out == in is allowed, and each call writes exactly what it read.
  Xxh64Stream hash(tail != nullptr ? tail->seed : 0);
  const bool hashing = tail != nullptr && tail->field >= 0;
  // Where the hashed range starts: known once the field's 4 bytes are decrypted (the first piece).
  size_t from = len;
  bool from_known = !hashing;
  for (size_t at = 0; ok && at < len;) {
    const int piece = (int)std::min<size_t>(len - at, hashing ? PIECE_BYTES : (size_t)1 << 30);
    ok = EVP_DecryptUpdate(ctx, data + at, &out, data + at, piece) == 1 && out == piece;
    at += (size_t)piece;
    if (!ok || !hashing) continue;
    if (!from_known && at >= (size_t)tail->field + 4) {
      uint32_t field;
      std::memcpy(&field, data + tail->field, 4);
      from = std::min<size_t>(field, len);
      from_known = true;
    }
    if (from_known && at > from) {
      const size_t start = std::max(from, at - (size_t)piece);
      hash.update(data + start, at - start);
    }
  }
  if (hashing && !from_known) from = len;  // shorter than the field: the range is empty
  if (hashing) tail->value = hash.digest();
  if (ok) ok = EVP_CIPHER_CTX_ctrl(ctx, EVP_CTRL_GCM_SET_TAG, (int)TAG_BYTES, const_cast<uint8_t*>(tag)) == 1;
  uint8_t final_block[16];
  if (ok) ok = EVP_DecryptFinal_ex(ctx, final_block, &out) > 0;
  EVP_CIPHER_CTX_free(ctx);
  return ok;
}

class OpenWorker : public Napi::AsyncWorker {
 public:
  OpenWorker(Napi::Env env, Napi::TypedArray data, std::vector<uint8_t> secret, std::vector<uint8_t> aad, TailHash tail)
      : Napi::AsyncWorker(env),
        tail_(tail),
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
    verified_ = open_in_place(data_, len_, s, s + KEY_BYTES, aad_.data(), aad_.size(), s + KEY_BYTES + NONCE_BYTES, &tail_);
    if (!verified_) std::memset(data_, 0, len_);
  }

  void OnOK() override {
    if (tail_.field < 0) deferred_.Resolve(Napi::Boolean::New(Env(), verified_));
    else if (!verified_) deferred_.Resolve(Env().Null());
    else deferred_.Resolve(Napi::BigInt::New(Env(), tail_.value));
  }
  void OnError(const Napi::Error& e) override { deferred_.Reject(e.Value()); }

 private:
  TailHash tail_;
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference data_ref_;  // keeps the buffer alive while the pool thread writes it
  uint8_t* data_;
  size_t len_;
  std::vector<uint8_t> secret_;  // key ‖ nonce ‖ tag
  std::vector<uint8_t> aad_;
  bool verified_ = false;
};

bool bytes_of(const Napi::Value& v, size_t want, const uint8_t** p, size_t* n) {
  if (!v.IsTypedArray()) return false;
  auto ta = v.As<Napi::TypedArray>();
  if (ta.TypedArrayType() != napi_uint8_array) return false;
  if (want != 0 && ta.ByteLength() != want) return false;
  *p = static_cast<const uint8_t*>(ta.ArrayBuffer().Data()) + ta.ByteOffset();
  *n = ta.ByteLength();
  return true;
}

template <bool Hash>
Napi::Value AesGcmOpenInPlace(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  const uint8_t *data, *key, *nonce, *aad, *tag;
  size_t data_len, key_len, nonce_len, aad_len, tag_len;
  TailHash tail;
  bool args_ok = info.Length() == (Hash ? 7u : 5u) && bytes_of(info[0], 0, &data, &data_len) && bytes_of(info[1], KEY_BYTES, &key, &key_len) &&
                 bytes_of(info[2], NONCE_BYTES, &nonce, &nonce_len) && bytes_of(info[3], 0, &aad, &aad_len) && bytes_of(info[4], TAG_BYTES, &tag, &tag_len);
  if (Hash && args_ok) {
    args_ok = info[5].IsNumber() && info[6].IsBigInt();
    if (args_ok) {
      const double field = info[5].As<Napi::Number>().DoubleValue();
      bool lossless = true;
      tail.seed = info[6].As<Napi::BigInt>().Uint64Value(&lossless);
      args_ok = field >= 0 && field <= 65536 && field == (double)(int64_t)field;
      tail.field = (int64_t)field;
    }
  }
  if (!args_ok) {
    Napi::Error e = Napi::Error::New(env, Hash ? "aesGcmOpenHashInPlace(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12), aad: Uint8Array, tag: Uint8Array(16), offsetField: 0..65536, seed: bigint)"
                                               : "aesGcmOpenInPlace(data: Uint8Array, key: Uint8Array(32), nonce: Uint8Array(12), aad: Uint8Array, tag: Uint8Array(16))");
    e.Set("code", Napi::String::New(env, "KVT_ERR_NATIVE_ARG"));
    e.ThrowAsJavaScriptException();
    return env.Undefined();
  }
  std::vector<uint8_t> secret(KEY_BYTES + NONCE_BYTES + TAG_BYTES);
  std::memcpy(secret.data(), key, KEY_BYTES);
  std::memcpy(secret.data() + KEY_BYTES, nonce, NONCE_BYTES);
  std::memcpy(secret.data() + KEY_BYTES + NONCE_BYTES, tag, TAG_BYTES);
  auto* worker = new OpenWorker(env, info[0].As<Napi::TypedArray>(), std::move(secret), std::vector<uint8_t>(aad, aad + aad_len), tail);
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

void register_aes_gcm(Napi::Env env, Napi::Object exports) {
  exports.Set("aesGcmOpenInPlace", Napi::Function::New(env, AesGcmOpenInPlace<false>));
  exports.Set("aesGcmOpenHashInPlace", Napi::Function::New(env, AesGcmOpenInPlace<true>));
}

}  // namespace kvt
