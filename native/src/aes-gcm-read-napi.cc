// Read a sealed blob from an open file and decrypt it while reading, on
// libuv's thread pool: pread in 64 KiB pieces into the caller's buffer, and
// each piece's ciphertext is decrypted in place right after it lands (still
// in cache), where a read followed by a separate open goes through the block
// twice and the pool twice. For kvtier's fs store (storage-adapters'
// GetOptions.fill, driven by src/kvtier/seal/sealed-read.ts).
//
//   aesGcmReadOpen(fd: number, data: Uint8Array, key: Uint8Array(32),
//                  expectPrefix: Uint8Array, nonceOffset: number,
//                  headerBytes: number, aadSuffix: Uint8Array) → Promise<0 | 1 | 2>
//   data.length bytes of fd from offset 0 land in data. The blob is
//     header [0, headerBytes) ‖ ciphertext ‖ 16-byte tag, nonce at
//     header[nonceOffset, +12), associated data = header ‖ aadSuffix.
//   1: the header starts with expectPrefix and the tag verified: data's
//      ciphertext range is plaintext now.
//   0: it started with expectPrefix but the tag failed: the ciphertext range
//      is zeroed (no unauthenticated plaintext is left).
//   2: it does not start with expectPrefix (another key id, not an envelope,
//      shorter than header + tag): data holds the file as stored, untouched
//      by the cipher, for the caller to judge.
//   Rejects (code EIO/EISDIR/…, or ESHORTREAD when the file is shorter than
//   data) on a failed read. The fd stays open (the caller's to close).
// Reference: the same bytes read by fs then opened by node:crypto
// (test/native/aes-gcm-read.test.ts), on both ciphers (aes-gcm-open.h).
#include <errno.h>
#include <napi.h>
#include <openssl/crypto.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "aes-gcm-open.h"
#include "napi-args.h"

namespace kvt {
namespace {

constexpr size_t READ_PIECE_BYTES = 64 * 1024;
constexpr size_t MAX_HEADER_BYTES = 4096;

struct ReadOpenJob {
  int fd;
  uint8_t* data;
  size_t len;
  std::vector<uint8_t> key;
  std::vector<uint8_t> prefix;
  size_t nonce_offset;
  size_t header_bytes;
  std::vector<uint8_t> aad_suffix;
};

// → 0/1/2 as above, or -1 with *error_code set (errno value, or 0 for a short read).
template <class Open>
int read_open_with(const ReadOpenJob& job, int* error_code) {
  uint8_t* data = job.data;
  const size_t len = job.len;
  const bool long_enough = len >= job.header_bytes + TAG_BYTES;
  const size_t body_end = long_enough ? len - TAG_BYTES : 0;
  std::unique_ptr<Open> open;
  bool decided = false;
  size_t read_to = 0, decrypted_to = job.header_bytes;
  while (read_to < len) {
    const ssize_t got = pread(job.fd, data + read_to, std::min(READ_PIECE_BYTES, len - read_to), (off_t)read_to);
    if (got < 0) {
      if (errno == EINTR) continue;
      *error_code = errno;
      return -1;
    }
    if (got == 0) {
      *error_code = 0;
      return -1;
    }
    read_to += (size_t)got;
    if (!decided && (read_to >= job.header_bytes || read_to == len)) {
      decided = true;
      if (long_enough && std::memcmp(data, job.prefix.data(), job.prefix.size()) == 0) {
        open = std::make_unique<Open>(job.key.data(), data + job.nonce_offset);
        std::vector<uint8_t> aad(data, data + job.header_bytes);  // one AAD stream: GHASH pads only at its end
        aad.insert(aad.end(), job.aad_suffix.begin(), job.aad_suffix.end());
        open->aad(aad.data(), aad.size());
      }
    }
    if (open == nullptr) continue;
    // Decrypt what has landed, up to the tag; every piece but the last a multiple of 16 bytes.
    const size_t upto = std::min(read_to, body_end);
    if (upto > decrypted_to) {
      size_t n = upto - decrypted_to;
      if (upto < body_end) n -= n % 16;
      if (n > 0) {
        open->update(data + decrypted_to, n);
        decrypted_to += n;
      }
    }
  }
  if (open == nullptr) return 2;
  if (open->verify(data + body_end)) return 1;
  std::memset(data + job.header_bytes, 0, body_end - job.header_bytes);
  return 0;
}

class ReadOpenWorker : public Napi::AsyncWorker {
 public:
  ReadOpenWorker(Napi::Env env, Napi::TypedArray data, ReadOpenJob job, bool vaes)
      : Napi::AsyncWorker(env), deferred_(Napi::Promise::Deferred::New(env)), data_ref_(Napi::Persistent(data.As<Napi::Object>())), job_(std::move(job)), vaes_(vaes) {}

  ~ReadOpenWorker() override { OPENSSL_cleanse(job_.key.data(), job_.key.size()); }

  Napi::Promise Promise() { return deferred_.Promise(); }

  void Execute() override {
    int error_code = 0;
    result_ = vaes_ ? read_open_with<VaesOpen>(job_, &error_code) : read_open_with<EvpOpen>(job_, &error_code);
    if (result_ >= 0) return;
    if (error_code == 0) {
      code_ = "ESHORTREAD";
      SetError("short read: the file is shorter than its size when opened; it was modified outside the store");
    } else {
      code_ = error_code == EISDIR ? "EISDIR" : error_code == EBADF ? "EBADF" : "EIO";
      SetError(std::string("read failed: ") + std::strerror(error_code));
    }
  }

  void OnOK() override { deferred_.Resolve(Napi::Number::New(Env(), result_)); }
  void OnError(const Napi::Error& e) override {
    Napi::Error error = Napi::Error::New(Env(), e.Message());
    error.Set("code", Napi::String::New(Env(), code_));
    deferred_.Reject(error.Value());
  }

 private:
  Napi::Promise::Deferred deferred_;
  Napi::ObjectReference data_ref_;  // keeps the buffer alive while the pool thread fills it
  ReadOpenJob job_;
  bool vaes_;
  int result_ = -1;
  std::string code_;
};

bool uint8_view(const Napi::Value& v, uint8_t** p, size_t* n) { return typed_bytes(v, p, n, napi_uint8_array); }

Napi::Value AesGcmReadOpen(const Napi::CallbackInfo& info) {
  Napi::Env env = info.Env();
  uint8_t *data, *key, *prefix, *suffix;
  size_t data_len, key_len, prefix_len, suffix_len;
  double fd, nonce_offset, header_bytes;
  bool ok = info.Length() == 7u && whole_number(info[0], 0, INT_MAX, &fd) && uint8_view(info[1], &data, &data_len) && uint8_view(info[2], &key, &key_len) &&
            key_len == KEY_BYTES && uint8_view(info[3], &prefix, &prefix_len) && whole_number(info[4], 0, MAX_HEADER_BYTES, &nonce_offset) &&
            whole_number(info[5], 1, MAX_HEADER_BYTES, &header_bytes) && uint8_view(info[6], &suffix, &suffix_len);
  ok = ok && prefix_len <= (size_t)header_bytes && (size_t)nonce_offset + NONCE_BYTES <= (size_t)header_bytes;
  if (!ok) {
    throw_code(env, "KVT_ERR_NATIVE_ARG", "aesGcmReadOpen(fd: integer ≥ 0, data: Uint8Array, key: Uint8Array(32), expectPrefix: Uint8Array (≤ headerBytes), nonceOffset: 0..headerBytes-12, headerBytes: 1..4096, aadSuffix: Uint8Array)");
    return env.Undefined();
  }
  ReadOpenJob job{(int)fd, data, data_len, std::vector<uint8_t>(key, key + key_len), std::vector<uint8_t>(prefix, prefix + prefix_len),
                  (size_t)nonce_offset, (size_t)header_bytes, std::vector<uint8_t>(suffix, suffix + suffix_len)};
  auto* worker = new ReadOpenWorker(env, info[1].As<Napi::TypedArray>(), std::move(job), gcm_vaes_usable());
  Napi::Promise promise = worker->Promise();
  worker->Queue();
  return promise;
}

}  // namespace

void register_aes_gcm_read(Napi::Env env, Napi::Object exports) { exports.Set("aesGcmReadOpen", Napi::Function::New(env, AesGcmReadOpen)); }

}  // namespace kvt
