// KV block codecs: the compressed forms of one kvtier block payload (f16 or
// f32 pages, kind kv or mla). Used by src/kvtier/codecs (store compresses in
// write-behind, load decompresses straight into the payload importBlocks takes).
//
// A payload is a run of matrices [T tokens][D], in payload order:
//   kind kv:  matrix m = (layer·2 + {0 K, 1 V})·kvHeads + head,  D = headDim
//   kind mla: matrix m = layer,                                 D = width (one latent row per token)
// Every codec stores the matrices in that order, each as its scales (f16) then its codes:
//   int8 (1): scales s[D] per channel (over the T tokens), codes i8[T][D]         x ≈ q · s[d],  |q| ≤ 127
//   fp8  (2): scales s[D] per channel,                     codes e4m3[T][D]       x ≈ e4m3 · s[d], |e4m3| ≤ 448
//   int4 (3): K and mla: s[D] per channel; V: s[T][ceil(D/32)] per 32 values of a row;
//             codes u4[T·D] = q + 8, |q| ≤ 7, two a byte (even index low nibble, an odd count padded)
// Decoding is one f32 multiply per value: the code converted exactly to f32
// (fp8 through its f16 bits, which are e4m3 · 2⁻⁸, with the scale premultiplied
// by 2⁸) times the f32 of its f16 scale; f16 pages round to nearest even. So
// the per-ISA kernels and the *_ref twin agree bit for bit.
#pragma once
#include <cstddef>
#include <cstdint>

#include "../common.h"

namespace kvt {

enum KvCodec : int { KV_CODEC_NONE = 0, KV_CODEC_INT8 = 1, KV_CODEC_FP8 = 2, KV_CODEC_INT4 = 3 };
constexpr int kKvCodecInt4Group = 32;  // values of a V row per int4 scale

struct KvCodecShape {
  int codec;     // KvCodec, not NONE
  int dtype;     // page element type: F32 or F16
  bool mla;      // kind mla (one latent matrix per layer) or kv (K and V per head)
  int layers;
  int kv_heads;  // 1 for mla
  int head_dim;  // D
  int tokens;    // T
  int matrices() const { return mla ? layers : layers * 2 * kv_heads; }
  bool is_v(int m) const { return !mla && (m / kv_heads) % 2 == 1; }
  bool per_group(int m) const { return codec == KV_CODEC_INT4 && is_v(m); }
  size_t matrix_values() const { return (size_t)tokens * head_dim; }
  size_t elem_bytes() const { return dtype == F32 ? 4 : 2; }
  size_t raw_bytes() const { return (size_t)matrices() * matrix_values() * elem_bytes(); }
  int groups_per_row() const { return (head_dim + kKvCodecInt4Group - 1) / kKvCodecInt4Group; }
  size_t matrix_scales(int m) const { return per_group(m) ? (size_t)tokens * groups_per_row() : (size_t)head_dim; }
  size_t matrix_code_bytes() const { return codec == KV_CODEC_INT4 ? (matrix_values() + 1) / 2 : matrix_values(); }
  size_t matrix_bytes(int m) const { return matrix_scales(m) * 2 + matrix_code_bytes(); }
};

// Stored bytes of a payload of this shape.
size_t kv_codec_bytes(const KvCodecShape& s);
// dst [kv_codec_bytes] ← src [raw_bytes] (f32 or f16 pages). Single pass, deterministic.
// false (dst unspecified) when a value is not finite or a scale would overflow f16.
bool kv_encode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s);
// dst [raw_bytes] (pages of s.dtype) ← src [kv_codec_bytes]; per-ISA kernel of the active table.
void kv_decode(uint8_t* dst, const uint8_t* src, const KvCodecShape& s);
// Plain reference twin of kv_decode, bit-identical.
void kv_decode_ref(uint8_t* dst, const uint8_t* src, const KvCodecShape& s);

// e4m3 (bias 7, no infinities, 0x7f/0xff NaN never produced) ↔ f32, nearest even, saturating at ±448.
uint8_t f32_to_e4m3(float v);
// The f16 bits of e4m3 · 2⁻⁸ (exact for every e4m3 value, subnormals included).
inline uint16_t e4m3_to_f16_scaled(uint8_t b) { return (uint16_t)(((b & 0x80) << 8) | ((b & 0x7f) << 7)); }

inline uint16_t load_u16(const uint8_t* p) {
  uint16_t v;
  std::memcpy(&v, p, 2);
  return v;
}

}  // namespace kvt
