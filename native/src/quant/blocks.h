// GGUF quantized block layouts, byte for byte as ggml stores them (every
// struct is packed by construction: only u8/i8/u16 members, no padding).
// One block covers QK elements of a row; a row of `cols` values is
// cols / QK consecutive blocks. f16 fields are IEEE half bits (f16_to_f32).
//
//   type    QK   bytes  layout
//   Q4_0    32   18     d | qs[16]            x = d·(q − 8),   q = 4 bit
//   Q4_1    32   20     d m | qs[16]          x = d·q + m
//   Q5_0    32   22     d | qh[4] qs[16]      x = d·(q − 16),  q = 4 bit + 1 high bit
//   Q5_1    32   24     d m | qh[4] qs[16]    x = d·q + m
//   Q8_0    32   34     d | qs[32] (int8)     x = d·q
//   IQ4_NL  32   18     d | qs[16]            x = d·kIq4Values[q]
//   Q2_K   256   84     scales[16] qs[64] d dmin       16 sub-blocks of 16, 4-bit scale | 4-bit min
//   Q3_K   256  110     hmask[32] qs[64] scales[12] d  16 sub-blocks of 16, 6-bit signed scales
//   Q4_K   256  144     d dmin scales[12] qs[128]      8 sub-blocks of 32, 6-bit scale and min
//   Q5_K   256  176     d dmin scales[12] qh[32] qs[128]
//   Q6_K   256  210     ql[128] qh[64] scales[16] (int8) d   16 sub-blocks of 16
//   IQ4_XS 256  136     d scales_h(u16) scales_l[4] qs[128]  8 sub-blocks of 32, 6-bit scales
//   Q8_K   256  292     d (f32) qs[256] (int8) bsums[16] (int16)   activations only
//
// For 4-bit packing in the 32-element types, byte j holds element j in its
// low nibble and element j + 16 in its high nibble.
#pragma once
#include <cstddef>
#include <cstdint>

namespace kvt {

constexpr int kQK = 32;    // elements per block of Q4_0 .. Q8_0, IQ4_NL
constexpr int kQKK = 256;  // elements per super-block of the K-quants, IQ4_XS
constexpr int kKScaleBytes = 12;

struct BlockQ4_0 { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockQ4_1 { uint16_t d, m; uint8_t qs[kQK / 2]; };
struct BlockQ5_0 { uint16_t d; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ5_1 { uint16_t d, m; uint8_t qh[4]; uint8_t qs[kQK / 2]; };
struct BlockQ8_0 { uint16_t d; int8_t qs[kQK]; };
struct BlockIq4Nl { uint16_t d; uint8_t qs[kQK / 2]; };
struct BlockQ2_K { uint8_t scales[kQKK / 16]; uint8_t qs[kQKK / 4]; uint16_t d, dmin; };
struct BlockQ3_K { uint8_t hmask[kQKK / 8]; uint8_t qs[kQKK / 4]; uint8_t scales[kKScaleBytes]; uint16_t d; };
struct BlockQ4_K { uint16_t d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qs[kQKK / 2]; };
struct BlockQ5_K { uint16_t d, dmin; uint8_t scales[kKScaleBytes]; uint8_t qh[kQKK / 8]; uint8_t qs[kQKK / 2]; };
struct BlockQ6_K { uint8_t ql[kQKK / 2]; uint8_t qh[kQKK / 4]; int8_t scales[kQKK / 16]; uint16_t d; };
struct BlockIq4Xs { uint16_t d; uint16_t scales_h; uint8_t scales_l[kQKK / 64]; uint8_t qs[kQKK / 2]; };
struct BlockQ8_K { float d; int8_t qs[kQKK]; int16_t bsums[kQKK / 16]; };

static_assert(sizeof(BlockQ4_0) == 18 && sizeof(BlockQ4_1) == 20 && sizeof(BlockQ5_0) == 22 && sizeof(BlockQ5_1) == 24,
              "legacy block sizes");
static_assert(sizeof(BlockQ8_0) == 34 && sizeof(BlockIq4Nl) == 18, "q8_0 / iq4_nl block sizes");
static_assert(sizeof(BlockQ2_K) == 84 && sizeof(BlockQ3_K) == 110 && sizeof(BlockQ4_K) == 144 &&
                  sizeof(BlockQ5_K) == 176 && sizeof(BlockQ6_K) == 210 && sizeof(BlockIq4Xs) == 136,
              "k-quant block sizes");
static_assert(sizeof(BlockQ8_K) == 292, "q8_K block size");

// The 16 non-uniform levels of IQ4_NL / IQ4_XS (ggml's kvalues_iq4nl).
constexpr int8_t kIq4Values[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};

// Q4_K / Q5_K: 6-bit scale and min of sub-block j (0..7) from the 12 packed bytes.
inline void k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* mn) {
  if (j < 4) {
    *sc = q[j] & 63;
    *mn = q[j + 4] & 63;
  } else {
    *sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4);
    *mn = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}

// Elements per block and bytes per block of a GGML type id; {0, 0} when the
// type has no layout here.
struct BlockGeometry {
  int elems;
  int bytes;
};
inline BlockGeometry block_geometry(int ggml_type) {
  switch (ggml_type) {
    case 0: return {1, 4};     // F32
    case 1: return {1, 2};     // F16
    case 30: return {1, 2};    // BF16
    case 2: return {32, 18};   // Q4_0
    case 3: return {32, 20};   // Q4_1
    case 6: return {32, 22};   // Q5_0
    case 7: return {32, 24};   // Q5_1
    case 8: return {32, 34};   // Q8_0
    case 20: return {32, 18};  // IQ4_NL
    case 10: return {256, 84};   // Q2_K
    case 11: return {256, 110};  // Q3_K
    case 12: return {256, 144};  // Q4_K
    case 13: return {256, 176};  // Q5_K
    case 14: return {256, 210};  // Q6_K
    case 23: return {256, 136};  // IQ4_XS
    case 15: return {256, 292};  // Q8_K
    default: return {0, 0};
  }
}

}  // namespace kvt
