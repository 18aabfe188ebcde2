// AES-256-GCM open with VAES + VPCLMULQDQ (see aes-gcm-vaes.h for why and
// how it is checked). Compiled once without ISA flags: the functions that use
// 512-bit instructions carry a target attribute and run only after
// gcm_vaes_usable() said the CPU has them.
//
// GHASH representation. A block's bytes are reversed (vpshufb) before use, so
// the coefficient of x^i sits at bit 127-i of the 128-bit value ("reflected").
// A carry-less product of two reflected values is then the reflected 256-bit
// product times x (one bit off); the hash key is stored premultiplied by x^-1
// (H<<1 with the 0xC2..01 fold when a bit falls off) to cancel it. Reduction
// mod x^128 + x^7 + x^2 + x + 1 folds the low 128 bits (the degrees >= 128)
// into the high half 64 bits at a time: x^128 = 1 + x + x^2 + x^7, which in
// reflected form is one carry-less multiply by 0xC200000000000000 plus the
// value itself moved up 128 bits.
#include "aes-gcm-vaes.h"

#include <openssl/crypto.h>

#include <cstring>

#include "dispatch.h"

#if defined(KVT_HAVE_X86)
// GCC 12 flags the undefined pass-through operand inside its own 512-bit extract intrinsics; binding.gyp silences the same for the avx512 library.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>
#define KVT_VAES __attribute__((target("aes,pclmul,sse4.1,avx2,avx512f,avx512bw,avx512vl,vaes,vpclmulqdq")))
#endif

namespace kvt {

#if defined(KVT_HAVE_X86)
namespace {

constexpr int ROUNDS = 14;  // AES-256

KVT_VAES inline __m128i reverse_bytes(__m128i x) { return _mm_shuffle_epi8(x, _mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)); }

// AES-256 key schedule: each new word is the xor of the word 8 back and the
// word before it (transformed every 4th word); `spread` is that prefix xor over
// the 4 words of the round key two back, `assist` the transformed word.
KVT_VAES inline __m128i schedule_step(__m128i two_back, __m128i assist) {
  __m128i shifted = _mm_slli_si128(two_back, 4);
  __m128i spread = _mm_xor_si128(two_back, shifted);
  shifted = _mm_slli_si128(shifted, 4);
  spread = _mm_xor_si128(spread, shifted);
  shifted = _mm_slli_si128(shifted, 4);
  spread = _mm_xor_si128(spread, shifted);
  return _mm_xor_si128(spread, assist);
}

KVT_VAES void expand_key(const uint8_t* key, __m128i* rk) {
  rk[0] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key));
  rk[1] = _mm_loadu_si128(reinterpret_cast<const __m128i*>(key + 16));
  // Even keys: RotWord(SubWord(last word)) ^ rcon (dword 3 of the assist); odd keys: SubWord(last word) (dword 2).
#define KVT_EVEN(i, rcon) rk[i] = schedule_step(rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[(i) - 1], rcon), 0xff))
#define KVT_ODD(i) rk[i] = schedule_step(rk[(i) - 2], _mm_shuffle_epi32(_mm_aeskeygenassist_si128(rk[(i) - 1], 0x00), 0xaa))
  KVT_EVEN(2, 0x01); KVT_ODD(3);
  KVT_EVEN(4, 0x02); KVT_ODD(5);
  KVT_EVEN(6, 0x04); KVT_ODD(7);
  KVT_EVEN(8, 0x08); KVT_ODD(9);
  KVT_EVEN(10, 0x10); KVT_ODD(11);
  KVT_EVEN(12, 0x20); KVT_ODD(13);
  KVT_EVEN(14, 0x40);
#undef KVT_EVEN
#undef KVT_ODD
}

KVT_VAES inline __m128i encrypt_block(const __m128i* rk, __m128i x) {
  x = _mm_xor_si128(x, rk[0]);
  for (int r = 1; r < ROUNDS; r++) x = _mm_aesenc_si128(x, rk[r]);
  return _mm_aesenclast_si128(x, rk[ROUNDS]);
}

// lo, mid, hi: the three overlapping 128-bit parts of a 256-bit carry-less product (mid shifted by 64).
KVT_VAES inline void multiply_add(__m128i a, __m128i b, __m128i& lo, __m128i& mid, __m128i& hi) {
  lo = _mm_xor_si128(lo, _mm_clmulepi64_si128(a, b, 0x00));
  hi = _mm_xor_si128(hi, _mm_clmulepi64_si128(a, b, 0x11));
  mid = _mm_xor_si128(mid, _mm_xor_si128(_mm_clmulepi64_si128(a, b, 0x01), _mm_clmulepi64_si128(a, b, 0x10)));
}

// 256-bit [X3:X2:X1:X0] → [X3:X2] + fold(X1:X0), the product reduced to 128 bits.
KVT_VAES inline __m128i reduce(__m128i lo, __m128i mid, __m128i hi) {
  const __m128i poly = _mm_set_epi64x(0, (long long)0xC200000000000000ULL);
  const __m128i low = _mm_xor_si128(lo, _mm_slli_si128(mid, 8));    // [X1:X0]
  const __m128i high = _mm_xor_si128(hi, _mm_srli_si128(mid, 8));   // [X3:X2]
  __m128i t = _mm_clmulepi64_si128(low, poly, 0x00);                // X0 folded: into X1 (t.lo) and X2 (t.hi, plus X0 itself)
  const __m128i mixed = _mm_xor_si128(_mm_shuffle_epi32(low, 0x4e), t);  // [X0^t.hi : X1^t.lo]
  t = _mm_clmulepi64_si128(mixed, poly, 0x00);                      // the updated X1 folded into X2, X3
  return _mm_xor_si128(high, _mm_xor_si128(_mm_shuffle_epi32(mixed, 0x4e), t));
}

KVT_VAES inline __m128i gf_multiply(__m128i a, __m128i b) {
  __m128i lo = _mm_setzero_si128(), mid = lo, hi = lo;
  multiply_add(a, b, lo, mid, hi);
  return reduce(lo, mid, hi);
}

KVT_VAES inline __m128i xor_lanes(__m512i v) {
  const __m256i half = _mm256_xor_si256(_mm512_castsi512_si256(v), _mm512_extracti64x4_epi64(v, 1));
  return _mm_xor_si128(_mm256_castsi256_si128(half), _mm256_extracti128_si256(half, 1));
}

KVT_VAES inline __m128i load_partial(const uint8_t* p, size_t n) {
  alignas(16) uint8_t padded[16] = {0};
  std::memcpy(padded, p, n);
  return _mm_load_si128(reinterpret_cast<const __m128i*>(padded));
}

KVT_VAES void construct(const uint8_t* key, const uint8_t* nonce, uint8_t* round_keys, uint8_t* h_powers, uint8_t* ghash, uint8_t* j0) {
  __m128i rk[ROUNDS + 1];
  expand_key(key, rk);
  for (int r = 0; r <= ROUNDS; r++) _mm_store_si128(reinterpret_cast<__m128i*>(round_keys) + r, rk[r]);
  // H = E(K, 0), reflected, times x^-1: shifted left one bit, 0xC2..01 folded in when the top bit falls off.
  alignas(16) uint64_t h[2];
  _mm_store_si128(reinterpret_cast<__m128i*>(h), reverse_bytes(encrypt_block(rk, _mm_setzero_si128())));
  const uint64_t carry = h[1] >> 63;
  h[1] = (h[1] << 1) | (h[0] >> 63);
  h[0] <<= 1;
  h[1] ^= carry * 0xC200000000000000ULL;
  h[0] ^= carry;
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h));
  OPENSSL_cleanse(h, sizeof h);
  // h_powers[i] = H^(16-i): a 16-block run multiplies block j by H^(16-j).
  __m128i power = h1;
  for (int i = 15; i >= 0; i--) {
    _mm_store_si128(reinterpret_cast<__m128i*>(h_powers) + i, power);
    power = gf_multiply(power, h1);
  }
  OPENSSL_cleanse(rk, sizeof rk);
  std::memset(ghash, 0, 16);
  std::memcpy(j0, nonce, 12);
  j0[12] = j0[13] = j0[14] = 0;
  j0[15] = 1;
}

KVT_VAES __m128i hash_blocks(__m128i state, const uint8_t* p, size_t n, __m128i h1) {
  for (; n >= 16; p += 16, n -= 16) state = gf_multiply(_mm_xor_si128(state, reverse_bytes(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)))), h1);
  if (n > 0) state = gf_multiply(_mm_xor_si128(state, reverse_bytes(load_partial(p, n))), h1);
  return state;
}

// Decrypts n bytes at p in place from block counter *counter on, folding the ciphertext into *state.
KVT_VAES void open_run(uint8_t* p, size_t n, const uint8_t* round_keys, const uint8_t* h_powers, const uint8_t* j0, uint8_t* state_bytes, uint32_t* counter) {
  const __m128i* rk128 = reinterpret_cast<const __m128i*>(round_keys);
  __m128i state = _mm_load_si128(reinterpret_cast<const __m128i*>(state_bytes));
  // Counter blocks are kept byte-reversed: the big-endian 32-bit counter is then dword 0, and a 32-bit add wraps as GCM's inc32 does.
  const __m128i base = _mm_insert_epi32(reverse_bytes(_mm_load_si128(reinterpret_cast<const __m128i*>(j0))), 0, 0);
  uint32_t c = *counter;
  if (n >= 256) {
    const __m512i swap = _mm512_broadcast_i32x4(_mm_set_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15));
    __m512i rk[ROUNDS + 1];
    for (int r = 0; r <= ROUNDS; r++) rk[r] = _mm512_broadcast_i32x4(rk128[r]);
    const __m512i* hp = reinterpret_cast<const __m512i*>(h_powers);
    const __m512i h0 = _mm512_load_si512(hp), hpow1 = _mm512_load_si512(hp + 1), hpow2 = _mm512_load_si512(hp + 2), hpow3 = _mm512_load_si512(hp + 3);
    const __m512i step4 = _mm512_set_epi32(0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4, 0, 0, 0, 4);
    __m512i ctr = _mm512_add_epi32(_mm512_broadcast_i32x4(base), _mm512_set_epi32(0, 0, 0, (int)(c + 3), 0, 0, 0, (int)(c + 2), 0, 0, 0, (int)(c + 1), 0, 0, 0, (int)c));
    for (; n >= 256; p += 256, n -= 256, c += 16) {
      // 16 counter blocks through the rounds, four per register (independent of the hash below).
      __m512i k0 = ctr, k1 = _mm512_add_epi32(k0, step4), k2 = _mm512_add_epi32(k1, step4), k3 = _mm512_add_epi32(k2, step4);
      ctr = _mm512_add_epi32(k3, step4);
      k0 = _mm512_xor_si512(_mm512_shuffle_epi8(k0, swap), rk[0]);
      k1 = _mm512_xor_si512(_mm512_shuffle_epi8(k1, swap), rk[0]);
      k2 = _mm512_xor_si512(_mm512_shuffle_epi8(k2, swap), rk[0]);
      k3 = _mm512_xor_si512(_mm512_shuffle_epi8(k3, swap), rk[0]);
      for (int r = 1; r < ROUNDS; r++) {
        k0 = _mm512_aesenc_epi128(k0, rk[r]);
        k1 = _mm512_aesenc_epi128(k1, rk[r]);
        k2 = _mm512_aesenc_epi128(k2, rk[r]);
        k3 = _mm512_aesenc_epi128(k3, rk[r]);
      }
      k0 = _mm512_aesenclast_epi128(k0, rk[ROUNDS]);
      k1 = _mm512_aesenclast_epi128(k1, rk[ROUNDS]);
      k2 = _mm512_aesenclast_epi128(k2, rk[ROUNDS]);
      k3 = _mm512_aesenclast_epi128(k3, rk[ROUNDS]);
      const __m512i d0 = _mm512_loadu_si512(p), d1 = _mm512_loadu_si512(p + 64), d2 = _mm512_loadu_si512(p + 128), d3 = _mm512_loadu_si512(p + 192);
      // GHASH of these 16 ciphertext blocks: (state + C0)·H^16 + C1·H^15 + … + C15·H, reduced once.
      const __m512i x0 = _mm512_xor_si512(_mm512_shuffle_epi8(d0, swap), _mm512_zextsi128_si512(state));
      const __m512i x1 = _mm512_shuffle_epi8(d1, swap), x2 = _mm512_shuffle_epi8(d2, swap), x3 = _mm512_shuffle_epi8(d3, swap);
      __m512i lo = _mm512_xor_si512(_mm512_xor_si512(_mm512_clmulepi64_epi128(x0, h0, 0x00), _mm512_clmulepi64_epi128(x1, hpow1, 0x00)),
                                    _mm512_xor_si512(_mm512_clmulepi64_epi128(x2, hpow2, 0x00), _mm512_clmulepi64_epi128(x3, hpow3, 0x00)));
      __m512i hi = _mm512_xor_si512(_mm512_xor_si512(_mm512_clmulepi64_epi128(x0, h0, 0x11), _mm512_clmulepi64_epi128(x1, hpow1, 0x11)),
                                    _mm512_xor_si512(_mm512_clmulepi64_epi128(x2, hpow2, 0x11), _mm512_clmulepi64_epi128(x3, hpow3, 0x11)));
      __m512i mid = _mm512_xor_si512(_mm512_xor_si512(_mm512_clmulepi64_epi128(x0, h0, 0x01), _mm512_clmulepi64_epi128(x1, hpow1, 0x01)),
                                     _mm512_xor_si512(_mm512_clmulepi64_epi128(x2, hpow2, 0x01), _mm512_clmulepi64_epi128(x3, hpow3, 0x01)));
      mid = _mm512_xor_si512(mid, _mm512_xor_si512(_mm512_xor_si512(_mm512_clmulepi64_epi128(x0, h0, 0x10), _mm512_clmulepi64_epi128(x1, hpow1, 0x10)),
                                                   _mm512_xor_si512(_mm512_clmulepi64_epi128(x2, hpow2, 0x10), _mm512_clmulepi64_epi128(x3, hpow3, 0x10))));
      state = reduce(xor_lanes(lo), xor_lanes(mid), xor_lanes(hi));
      _mm512_storeu_si512(p, _mm512_xor_si512(d0, k0));
      _mm512_storeu_si512(p + 64, _mm512_xor_si512(d1, k1));
      _mm512_storeu_si512(p + 128, _mm512_xor_si512(d2, k2));
      _mm512_storeu_si512(p + 192, _mm512_xor_si512(d3, k3));
    }
    OPENSSL_cleanse(rk, sizeof rk);  // round keys do not outlive the call on the stack
  }
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h_powers) + 15);
  for (; n > 0; c++) {
    const size_t take = n < 16 ? n : 16;
    const __m128i keystream = encrypt_block(rk128, reverse_bytes(_mm_insert_epi32(base, (int)c, 0)));
    const __m128i data = take == 16 ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)) : load_partial(p, take);
    state = gf_multiply(_mm_xor_si128(state, reverse_bytes(data)), h1);  // a short last block is hashed zero-padded
    const __m128i out = _mm_xor_si128(data, keystream);
    if (take == 16) {
      _mm_storeu_si128(reinterpret_cast<__m128i*>(p), out);
    } else {
      alignas(16) uint8_t bytes[16];
      _mm_store_si128(reinterpret_cast<__m128i*>(bytes), out);
      std::memcpy(p, bytes, take);
      OPENSSL_cleanse(bytes, sizeof bytes);
    }
    p += take;
    n -= take;
  }
  _mm_store_si128(reinterpret_cast<__m128i*>(state_bytes), state);
  *counter = c;
}

KVT_VAES void absorb_aad(const uint8_t* p, size_t n, const uint8_t* h_powers, uint8_t* state_bytes) {
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h_powers) + 15);
  const __m128i state = hash_blocks(_mm_load_si128(reinterpret_cast<const __m128i*>(state_bytes)), p, n, h1);
  _mm_store_si128(reinterpret_cast<__m128i*>(state_bytes), state);
}

KVT_VAES bool finish(uint64_t aad_bytes, uint64_t data_bytes, const uint8_t* round_keys, const uint8_t* h_powers, const uint8_t* j0, const uint8_t* state_bytes, const uint8_t* tag) {
  uint8_t lengths[16];
  for (int i = 0; i < 8; i++) {
    lengths[i] = (uint8_t)((aad_bytes * 8) >> (56 - 8 * i));
    lengths[8 + i] = (uint8_t)((data_bytes * 8) >> (56 - 8 * i));
  }
  const __m128i h1 = _mm_load_si128(reinterpret_cast<const __m128i*>(h_powers) + 15);
  const __m128i state = hash_blocks(_mm_load_si128(reinterpret_cast<const __m128i*>(state_bytes)), lengths, 16, h1);
  const __m128i mask = encrypt_block(reinterpret_cast<const __m128i*>(round_keys), _mm_load_si128(reinterpret_cast<const __m128i*>(j0)));
  const __m128i diff = _mm_xor_si128(_mm_xor_si128(reverse_bytes(state), mask), _mm_loadu_si128(reinterpret_cast<const __m128i*>(tag)));
  return _mm_testz_si128(diff, diff) != 0;  // all 128 bits compared, no early exit
}

bool cpu_has_vaes() {
  return __builtin_cpu_supports("aes") && __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
         __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("vaes") && __builtin_cpu_supports("vpclmulqdq");
}

}  // namespace

bool gcm_vaes_usable() {
  static const bool cpu = cpu_has_vaes();
  return cpu && std::strcmp(active_kernels().isa, "avx512") == 0;
}

GcmVaesOpen::GcmVaesOpen(const uint8_t* key, const uint8_t* nonce) { construct(key, nonce, round_keys_, h_powers_, ghash_, j0_); }

GcmVaesOpen::~GcmVaesOpen() {
  OPENSSL_cleanse(round_keys_, sizeof round_keys_);
  OPENSSL_cleanse(h_powers_, sizeof h_powers_);
  OPENSSL_cleanse(ghash_, sizeof ghash_);
}

void GcmVaesOpen::aad(const uint8_t* p, size_t n) {
  absorb_aad(p, n, h_powers_, ghash_);
  aad_bytes_ += n;
}

void GcmVaesOpen::update(uint8_t* p, size_t n) {
  if (finished_) {  // a short piece was not the last: refuse at verify rather than hash a misaligned stream
    misused_ = true;
    return;
  }
  open_run(p, n, round_keys_, h_powers_, j0_, ghash_, &counter_);
  data_bytes_ += n;
  if (n % 16 != 0) finished_ = true;
}

bool GcmVaesOpen::verify(const uint8_t* tag) { return !misused_ && finish(aad_bytes_, data_bytes_, round_keys_, h_powers_, j0_, ghash_, tag); }

#else  // not x86: never usable, the OpenSSL path runs

bool gcm_vaes_usable() { return false; }
GcmVaesOpen::GcmVaesOpen(const uint8_t*, const uint8_t*) {}
GcmVaesOpen::~GcmVaesOpen() {}
void GcmVaesOpen::aad(const uint8_t*, size_t) {}
void GcmVaesOpen::update(uint8_t*, size_t) { misused_ = true; }
bool GcmVaesOpen::verify(const uint8_t*) { return false; }

#endif

}  // namespace kvt
