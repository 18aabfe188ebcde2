// Matmul by the legacy 32-value block quants (Q4_0, Q4_1, Q5_0, Q5_1),
// IQ4_NL and IQ4_XS: packed layout, GGUF block decoding shared by the
// packer and the reference twin, and the entry points.
//
// Packed layout (pack_weight → pack_legacy): 16-row panels, then per block
// (32 values; IQ4_XS: super-block of 256) of the panel:
//
//   Q4_0, IQ4_NL  f16 d[16] | qs[4][16][4]                     288 B  (GGUF 16 × 18)
//   Q4_1          f16 d[16] | f16 m[16] | qs[4][16][4]          320 B  (16 × 20)
//   Q5_0          f16 d[16] | qh[16][4] | qs[4][16][4]          352 B  (16 × 22)
//   Q5_1          f16 d[16] | f16 m[16] | qh[16][4] | qs[4][16][4]   384 B  (16 × 24)
//   IQ4_XS        f16 d[16] | i8 ls[8][16] | 8 × qs[4][16][4]   2208 B per 256 (16 × 138, GGUF 136)
//
// qs byte (g, j, t) holds the 4-bit code of row j, column 4g+t in its low
// nibble and of column 16+4g+t in its high nibble, so one 64-byte load gives
// the codes of 16 rows × 4 columns for two groups (what vpdpbusd consumes
// against 4 broadcast activation bytes). Q5: bit g' (0..7) of qh byte (j, t)
// is the fifth bit of column 4g'+t. IQ4_XS: ls = the 6-bit sub-block scale − 32.
//
// Values: Q4_0 d·(q−8), Q5_0 d·(q−16), Q4_1/Q5_1 d·q + m, IQ4_NL d·L[q],
// IQ4_XS d·ls·L[q] (L = kIq4Values). Every block dot is an exact integer sum
// over int8-quantized activations; see matmul-legacy.cc for the f32 order.
#pragma once
#include <cstring>

#include "../kernels.h"
#include "../quant/blocks.h"

namespace kvt {

inline bool is_legacy_quant(int dtype) {
  return dtype == Q4_0 || dtype == Q4_1 || dtype == Q5_0 || dtype == Q5_1 || dtype == IQ4_NL || dtype == IQ4_XS;
}

// Byte offsets inside one packed panel block (-1: the type has no such part).
struct LegacyPack {
  int d, m, qh, ls, qs, bytes;
};
constexpr LegacyPack legacy_pack(int dtype) {
  switch (dtype) {
    case Q4_1: return {0, 32, -1, -1, 64, 320};
    case Q5_0: return {0, -1, 32, -1, 96, 352};
    case Q5_1: return {0, 32, 64, -1, 128, 384};
    case IQ4_XS: return {0, -1, -1, 32, 160, 2208};
    default: return {0, -1, -1, -1, 32, 288};  // Q4_0, IQ4_NL
  }
}
constexpr int legacy_block_elems(int dtype) { return dtype == IQ4_XS ? kQKK : kQK; }
constexpr int kQsGroupBytes = kPanel * 4;            // one 64-byte load: 16 rows × 4 columns
constexpr int kQsBlockBytes = 4 * kQsGroupBytes;     // nibbles of 16 rows × 32 columns

// Integer code offset: value = code − offset (scale aside) for Q4_0 / Q5_0.
constexpr int legacy_code_offset(int dtype) { return dtype == Q4_0 ? 8 : dtype == Q5_0 ? 16 : 0; }

// Codes of one GGUF block of 32 values (Q4_0 .. Q5_1, IQ4_NL): q[i] is 0..15
// (0..31 for Q5; the level index for IQ4_NL); d, m: f16 bits (m = 0 if none).
inline void legacy_block_codes(int dtype, const uint8_t* blk, uint8_t* q, uint16_t* d, uint16_t* m) {
  std::memcpy(d, blk, 2);
  *m = 0;
  const bool has_m = dtype == Q4_1 || dtype == Q5_1;
  if (has_m) std::memcpy(m, blk + 2, 2);
  const uint8_t* p = blk + (has_m ? 4 : 2);
  uint32_t qh = 0;
  if (dtype == Q5_0 || dtype == Q5_1) {
    std::memcpy(&qh, p, 4);
    p += 4;
  }
  for (int i = 0; i < 16; ++i) {
    q[i] = (uint8_t)((p[i] & 0xF) | (((qh >> i) & 1) << 4));
    q[i + 16] = (uint8_t)((p[i] >> 4) | (((qh >> (i + 16)) & 1) << 4));
  }
}

// Codes of one IQ4_XS super-block: q[256] level indices, d f16 bits, ls[8] = scale − 32.
inline void iq4xs_block_codes(const uint8_t* blk, uint8_t* q, uint16_t* d, int8_t* ls) {
  BlockIq4Xs b;
  std::memcpy(&b, blk, sizeof b);
  *d = b.d;
  for (int ib = 0; ib < kQKK / kQK; ++ib) {
    int lo = (b.scales_l[ib / 2] >> (4 * (ib % 2))) & 0xF;
    int hi = (b.scales_h >> (2 * ib)) & 3;
    ls[ib] = (int8_t)((lo | (hi << 4)) - 32);
    const uint8_t* qs = b.qs + ib * 16;
    for (int i = 0; i < 16; ++i) {
      q[ib * kQK + i] = qs[i] & 0xF;
      q[ib * kQK + i + 16] = qs[i] >> 4;
    }
  }
}

// Activation scales as llama.cpp's activation blocks carry them (block_q8_0 /
// block_q8_1, made by quantize_row_q8_0 / _q8_1 with the same int8 values as
// quantize_rows_q8): d as f16, and for q8_1 s = f16(d·Σq) computed from the
// f32 d. With these the per-block terms d_w·d_x·isum and m_w·s equal ggml's,
// so results track llama.cpp's to float rounding. d [n] in place, s_f [n] out.
inline void ggml_q8_scales(float* d, float* s_f, const int32_t* sum, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    s_f[i] = f16_to_f32(f32_to_f16(d[i] * (float)sum[i]));
    d[i] = f16_to_f32(f32_to_f16(d[i]));
  }
}

// IQ4_XS activations as ggml's quantize_row_q8_K makes them (llama.cpp dots
// IQ4_XS with block_q8_K): per 256 values, max = the first value of largest
// magnitude, iscale = −127/max, q = min(127, round_half_even(iscale·x)),
// d = 1/iscale (f32, d = q = 0 for an all-zero block); and the int32 sum of q
// per 32 values. out.q [m][k], out.d [m][k/256], out.sum [m][k/32]; k % 256 == 0.
void quantize_rows_q8k_ggml(Q8Rows out, const float* x, int m, int k);

size_t legacy_packed_bytes(int dtype, int rows, int cols);
// Packs panels [p0, p1) of a GGUF [rows][cols] weight (rows past `rows` are zero).
void pack_legacy(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, size_t p0, size_t p1);
// Reference twin: out [m][n] = x [m][k] · Wᵀ on the GGUF layout.
void matmul_legacy_ref(float* out, const float* x, const uint8_t* w, int dtype, int n, int k, int m);

#ifdef KVT_ISA_NS
namespace KVT_ISA_NS {
void matmul_legacy(float* out, const float* x, const PackedWeight& w, int m, ThreadPool& pool);
}
#endif

}  // namespace kvt
