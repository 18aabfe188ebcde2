// Matmul by the K-quants (Q2_K, Q3_K, Q4_K, Q5_K, Q6_K): the packed panel
// layout, GGUF super-block decoding shared by the packer and the reference
// twin, the Q8_K-style activation quantizer and the entry points.
//
// Every K-quant value is  d·s_j·(u − off) − dmin·m_j  with u an unsigned code
// of `bits` bits, s_j / m_j the scale / min of sub-block j (16 or 32 values):
//
//   type  bits  sub  off  scale s_j              min m_j   d, dmin
//   Q2_K   2    16    0   u4 (low nibble)        u4        f16, f16
//   Q3_K   3    16    4   6-bit − 32 (signed)    –         f16
//   Q4_K   4    32    0   u6                     u6        f16, f16
//   Q5_K   5    32    0   u6                     u6        f16, f16
//   Q6_K   6    16   32   i8                     –         f16
//
// Packed layout (pack_weight → pack_kquant): 16-row panels, then per 256-value
// super-block of the panel one "PSB":
//
//   f16 d[16] | f16 dmin[16] (types with a min) | scales (256 B) | lo plane | hi plane
//   scales: Q4_K/Q5_K u8 s[8][16] then u8 m[8][16]; Q3_K/Q6_K i8 s[16][16];
//           Q2_K u8 (s | m << 4)[16][16]   (index [sub-block][row])
//   plane of w-bit fields: per unit of 32 columns (u = 0..7) w loads of 64 B;
//           load l, byte (row j, t) holds at bit shift (g % (8/w))·w the field
//           of column 32u + 4g + t, g = l·(8/w) + (g % (8/w)), g = 0..7.
//   lo plane = low `lo_bits` of u (4 or 2), hi plane = the rest (0, 1 or 2 bits).
//
// One 64-byte load of a plane thus gives 16 rows × 4 columns of (8/w) groups,
// what vpdpbusd (u8 weights × s8 activations) consumes against 4 broadcast
// activation bytes; codes stay unsigned (0..63), so AVX2 maddubs never saturates.
//
// Bytes per PSB: Q2_K 1344 (GGUF 16 × 84 = 1344), Q3_K 1824 (1760), Q4_K 2368
// (2304), Q5_K 2880 (2816), Q6_K 3360 (3360).
//
// Activations (quantize_rows_q8k): per 256 values one f32 scale d = amax/127,
// q = round_half_even(x/d) in [-127, 127] (error ≤ d/2 per value), and the
// int32 sum of q per 16 values. Numerics per output and super-block:
//   isum = Σ_j s_j·(Σ u·q − off·Σ q)        exact int32
//   imin = Σ_j m_j·Σ q                       exact int32
//   acc  = fma(d_w·d_x, (float)isum, acc);  acc = fma(dmin_w·(−d_x), (float)imin, acc)
#pragma once
#include <cstring>

#include "../kernels.h"
#include "../quant/blocks.h"

namespace kvt {

inline bool is_kquant(int dtype) { return dtype == Q2_K || dtype == Q3_K || dtype == Q4_K || dtype == Q5_K || dtype == Q6_K; }

struct KqSpec {
  int lo_bits, hi_bits;  // code bits in the lo / hi planes
  int sub;               // values per sub-block (16 or 32)
  int off;               // code offset (value ∝ u − off)
  bool has_min;
  int scale_kind;  // 0: u8 s[8][16] + u8 m[8][16]; 1: i8 s[16][16]; 2: u8 (s | m<<4)[16][16]
  int gguf_bytes;  // bytes of one GGUF super-block
  constexpr int bits() const { return lo_bits + hi_bits; }
  constexpr int hdr() const { return has_min ? 64 + 256 : 32 + 256; }
  constexpr int scales_at() const { return has_min ? 64 : 32; }
  constexpr int lo_at() const { return hdr(); }
  constexpr int hi_at() const { return hdr() + 8 * lo_bits * 64; }
  constexpr int bytes() const { return hdr() + 8 * bits() * 64; }  // one PSB
  constexpr int nsub() const { return 256 / sub; }
};

constexpr KqSpec kq_spec(int dtype) {
  switch (dtype) {
    case Q2_K: return {2, 0, 16, 0, true, 2, 84};
    case Q3_K: return {2, 1, 16, 4, false, 1, 110};
    case Q5_K: return {4, 1, 32, 0, true, 0, 176};
    case Q6_K: return {4, 2, 16, 32, false, 1, 210};
    default: return {4, 0, 32, 0, true, 0, 144};  // Q4_K
  }
}

// One GGUF super-block, decoded: u[256] unsigned codes, s / m per sub-block
// (nsub() entries; m = 0 without a min), d / dmin f16 bits (dmin = 0 without).
struct KqBlock {
  uint8_t u[256];
  int16_t s[16];
  uint8_t m[16];
  uint16_t d, dmin;
};

// Follows ggml's dequantize_row_<t> element order (value of element e of the
// block = d·s[e/sub]·(u[e] − off) − dmin·m[e/sub]).
inline void kquant_block_codes(int dtype, const uint8_t* blk, KqBlock* o) {
  std::memset(o, 0, sizeof *o);
  switch (dtype) {
    case Q2_K: {
      BlockQ2_K b;
      std::memcpy(&b, blk, sizeof b);
      o->d = b.d;
      o->dmin = b.dmin;
      for (int j = 0; j < 16; ++j) o->s[j] = b.scales[j] & 0xF, o->m[j] = b.scales[j] >> 4;
      for (int e = 0; e < 256; ++e) {  // h = e/128, j = (e%128)/32, l = e%32
        int h = e / 128, j = (e % 128) / 32, l = e % 32;
        o->u[e] = (b.qs[32 * h + l] >> (2 * j)) & 3;
      }
      return;
    }
    case Q3_K: {
      BlockQ3_K b;
      std::memcpy(&b, blk, sizeof b);
      o->d = b.d;
      for (int j = 0; j < 16; ++j) {
        int lo = j < 8 ? (b.scales[j] & 0xF) : (b.scales[j - 8] >> 4);
        int hi = (b.scales[8 + j % 4] >> (2 * (j / 4))) & 3;
        o->s[j] = (int16_t)((lo | (hi << 4)) - 32);
      }
      for (int e = 0; e < 256; ++e) {
        int h = e / 128, j = (e % 128) / 32, l = e % 32;
        int q2 = (b.qs[32 * h + l] >> (2 * j)) & 3;
        int hb = (b.hmask[l] >> (4 * h + j)) & 1;
        o->u[e] = (uint8_t)(q2 | (hb << 2));
      }
      return;
    }
    case Q4_K:
    case Q5_K: {
      const bool five = dtype == Q5_K;
      BlockQ5_K b5;
      BlockQ4_K b4;
      const uint8_t* sc;
      const uint8_t* qs;
      if (five) {
        std::memcpy(&b5, blk, sizeof b5);
        o->d = b5.d, o->dmin = b5.dmin, sc = b5.scales, qs = b5.qs;
      } else {
        std::memcpy(&b4, blk, sizeof b4);
        o->d = b4.d, o->dmin = b4.dmin, sc = b4.scales, qs = b4.qs;
      }
      for (int j = 0; j < 8; ++j) {
        uint8_t s, m;
        k_scale_min(j, sc, &s, &m);
        o->s[j] = s, o->m[j] = m;
      }
      for (int e = 0; e < 256; ++e) {  // c = e/64 chunk, high nibble for its second 32
        int c = e / 64, hi = (e % 64) / 32, l = e % 32;
        int q = (qs[32 * c + l] >> (4 * hi)) & 0xF;
        if (five) q |= ((b5.qh[l] >> (2 * c + hi)) & 1) << 4;
        o->u[e] = (uint8_t)q;
      }
      return;
    }
    case Q6_K: {
      BlockQ6_K b;
      std::memcpy(&b, blk, sizeof b);
      o->d = b.d;
      for (int j = 0; j < 16; ++j) o->s[j] = b.scales[j];
      for (int e = 0; e < 256; ++e) {  // h = e/128, quarter qq, l = e%32
        int h = e / 128, qq = (e % 128) / 32, l = e % 32;
        int lo = (b.ql[64 * h + l + 32 * (qq & 1)] >> (4 * (qq >> 1))) & 0xF;
        int hi = (b.qh[32 * h + l] >> (2 * qq)) & 3;
        o->u[e] = (uint8_t)(lo | (hi << 4));
      }
      return;
    }
  }
}

// Q8_K-style activations of M rows of K values (K % 256 == 0).
struct Q8KRows {
  int8_t* q;      // [M][K]
  float* d;       // [M][K/256]
  int32_t* bsum;  // [M][K/16]
};
void quantize_rows_q8k(Q8KRows out, const float* x, int m, int k);

size_t kquant_row_bytes(int dtype, int cols);
size_t kquant_packed_bytes(int dtype, int rows, int cols);
// Packs panels [p0, p1) of a GGUF [rows][cols] weight (rows past `rows` are zero).
void pack_kquant(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, size_t p0, size_t p1);
// Reference twin: out [m][n] = x [m][k] · Wᵀ on the GGUF layout.
void matmul_kquant_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m);

#ifdef KVT_ISA_NS
namespace KVT_ISA_NS {
void matmul_kquant(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool);
}
#endif

}  // namespace kvt
