// Shared plain types and scalar helpers of the CPU compute core.
//
// Numerics contract (why kernels are written the way they are):
//   every output element is computed by exactly one thread, in one fixed
//   order of floating-point operations that depends only on that element's
//   inputs — never on M, on the thread count, on how rows are grouped into
//   calls, or on the ISA. Sums over a dimension use either
//     (a) "sequential": acc = fma(a_k, b_k, acc) for k = 0, 1, …  (matmul), or
//     (b) "lane16": 16 partial sums, lane j takes k ≡ j (mod 16) sequentially,
//         then a fixed tree (j, j+8) → (j, j+4) → (j, j+2) → (j, j+1)
//         (norms, softmax sums, attention dots).
//   The scalar path emulates the same lanes, so scalar, AVX2 and AVX-512
//   agree bit for bit; the *_ref twins use the same orders with plain loops.
#pragma once
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>

namespace kvt {

// Element types; values are GGML type ids so a GGUF tensor type passes through.
enum DType : int {
  F32 = 0, F16 = 1, Q4_0 = 2, Q4_1 = 3, Q5_0 = 6, Q5_1 = 7, Q8_0 = 8, Q8_1 = 9,
  Q2_K = 10, Q3_K = 11, Q4_K = 12, Q5_K = 13, Q6_K = 14, Q8_K = 15,
  IQ4_NL = 20, IQ4_XS = 23, BF16 = 30
};

constexpr int kQ8Block = 32;       // values per Q8_0 block
constexpr int kQ8BlockBytes = 34;  // f16 scale + 32 int8
constexpr int kPanel = 16;         // weight rows per packed panel (one zmm of outputs)
constexpr int kPageTokens = 64;    // tokens per KV page (= one kvtier block)

// The float with these IEEE-754 bits, and back (memcpy: no aliasing rule broken).
inline float f32_from_bits(uint32_t bits) {
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

inline uint32_t f32_bits(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  return bits;
}

inline float f16_to_f32(uint16_t h) {
  uint32_t sign = (uint32_t)(h & 0x8000) << 16;
  uint32_t exp = (h >> 10) & 0x1f;
  uint32_t mant = h & 0x3ff;
  uint32_t bits;
  if (exp == 0) {
    if (mant == 0) {
      bits = sign;
    } else {  // subnormal: normalise
      int e = -1;
      do { mant <<= 1; ++e; } while ((mant & 0x400) == 0);
      mant &= 0x3ff;
      bits = sign | ((uint32_t)(127 - 15 - e) << 23) | (mant << 13);
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (mant << 13);
  } else {
    bits = sign | ((exp + 127 - 15) << 23) | (mant << 13);
  }
  return f32_from_bits(bits);
}

// Round-to-nearest-even, same as vcvtps2ph with imm 0 (MXCSR default).
inline uint16_t f32_to_f16(float f) {
  const uint32_t x = f32_bits(f);
  uint32_t sign = (x >> 16) & 0x8000;
  uint32_t absx = x & 0x7fffffff;
  if (absx >= 0x7f800000u) {  // inf / nan
    return (uint16_t)(sign | 0x7c00 | (absx > 0x7f800000u ? 0x200 | ((absx >> 13) & 0x3ff) : 0));
  }
  if (absx >= 0x477ff000u) return (uint16_t)(sign | 0x7c00);  // rounds to >= 65520 → inf
  if (absx < 0x38800000u) {  // below smallest normal half (2^-14): subnormal or zero
    if (absx < 0x33000000u) return (uint16_t)sign;  // < 2^-25 → ±0
    uint32_t e = absx >> 23;
    uint32_t m = (absx & 0x7fffff) | 0x800000;
    // value = m * 2^(e-150); the half subnormal unit is 2^-24, so drop 126 - e bits
    uint32_t drop = 126 - e;
    uint32_t r = m >> drop;
    uint32_t rem = m & ((1u << drop) - 1);
    uint32_t half = 1u << (drop - 1);
    if (rem > half || (rem == half && (r & 1))) ++r;
    return (uint16_t)(sign | r);
  }
  uint32_t r = absx - 0x38000000u;  // rebias exponent 127 → 15
  uint32_t mant = r >> 13;
  uint32_t rem = r & 0x1fff;
  if (rem > 0x1000 || (rem == 0x1000 && (mant & 1))) ++mant;
  return (uint16_t)(sign | mant);
}

inline float bf16_to_f32(uint16_t h) { return f32_from_bits((uint32_t)h << 16); }

inline uint16_t f32_to_bf16(float f) {
  uint32_t x = f32_bits(f);
  if ((x & 0x7fffffff) > 0x7f800000u) return (uint16_t)((x >> 16) | 0x40);
  x += 0x7fff + ((x >> 16) & 1);
  return (uint16_t)(x >> 16);
}

// exp with the exact operation order of the vector versions (simd/*.h):
// Cephes-style range reduction + degree-5 polynomial, all in fma.
inline float exp_kvt(float x) {
  x = std::fmin(std::fmax(x, -87.0f), 88.3f);
  float n = std::nearbyintf(x * 1.44269504088896341f);
  float r = std::fmaf(n, -0.693359375f, x);
  r = std::fmaf(n, 2.12194440e-4f, r);
  float y = 1.9875691500e-4f;
  y = std::fmaf(y, r, 1.3981999507e-3f);
  y = std::fmaf(y, r, 8.3334519073e-3f);
  y = std::fmaf(y, r, 4.1665795894e-2f);
  y = std::fmaf(y, r, 1.6666665459e-1f);
  y = std::fmaf(y, r, 5.0000001201e-1f);
  y = std::fmaf(y, r * r, r);
  y = y + 1.0f;
  int32_t e = ((int32_t)n + 127) << 23;
  float scale;
  std::memcpy(&scale, &e, 4);
  return y * scale;
}

// lane16 tree reduction of 16 partial sums.
inline float reduce16(const float* p) {
  float a[8], b[4], c[2];
  for (int j = 0; j < 8; ++j) a[j] = p[j] + p[j + 8];
  for (int j = 0; j < 4; ++j) b[j] = a[j] + a[j + 4];
  for (int j = 0; j < 2; ++j) c[j] = b[j] + b[j + 2];
  return c[0] + c[1];
}

// KV page geometry: page[layer][K|V][kvHead][64 tokens][headDim].
struct KvLayout {
  int layers;
  int kv_heads;
  int head_dim;
  int dtype;  // F32 or F16
  size_t elem_bytes() const { return dtype == F32 ? 4 : 2; }
  size_t head_elems() const { return (size_t)kPageTokens * head_dim; }
  size_t page_elems() const { return (size_t)layers * 2 * kv_heads * head_elems(); }
  size_t page_bytes() const { return page_elems() * elem_bytes(); }
  // element offset of token slot `slot` of (layer, kv 0=K / 1=V, head) in a page
  size_t offset(int layer, int kv, int head, int slot) const {
    return (((size_t)layer * 2 + kv) * kv_heads + head) * head_elems() + (size_t)slot * head_dim;
  }
};

// One run of queries of one sequence: positions [pos0, pos0 + n_q) attending
// causally over keys [0, pos0 + n_q); pages = block_table[0 .. n_blocks).
struct AttnSegment {
  const int32_t* block_table;
  int n_blocks;
  int pos0;
  int n_q;
  int q_row0;  // first row of this segment in q / out
};

// Q8_0-quantized activations, one row per x row: int8 values, per-block f32
// scale and per-block sum of the int8 values (the VNNI path needs it).
struct Q8Rows {
  int8_t* q;      // [M][K]
  float* d;       // [M][K/32]
  int32_t* sum;   // [M][K/32]
};

}  // namespace kvt
