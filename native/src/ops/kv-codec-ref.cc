// Reference twin of kv_decode (ops/kv-codec.cc): plain loops, one value at a
// time, in the formats of kv-codec.h. Bit-identical to every ISA's kernel.
#include "kv-codec.h"

namespace kvt {

void kv_decode_ref(uint8_t* dst, const uint8_t* src, const KvCodecShape& s) {
  const int T = s.tokens, D = s.head_dim, G = kKvCodecInt4Group, groups = s.groups_per_row();
  const size_t n = s.matrix_values();
  const uint8_t* in = src;
  for (int m = 0; m < s.matrices(); ++m) {
    const bool grouped = s.per_group(m);
    const uint8_t* codes = in + s.matrix_scales(m) * 2;
    uint8_t* out = dst + (size_t)m * n * s.elem_bytes();
    for (int t = 0; t < T; ++t) {
      for (int d = 0; d < D; ++d) {
        const size_t i = (size_t)t * D + d;
        const size_t k = grouped ? (size_t)t * groups + d / G : (size_t)d;
        float scale = f16_to_f32(load_u16(in + k * 2));
        float code;
        if (s.codec == KV_CODEC_INT8) {
          code = (float)(int8_t)codes[i];
        } else if (s.codec == KV_CODEC_FP8) {
          code = f16_to_f32(e4m3_to_f16_scaled(codes[i]));
          scale = scale * 256.0f;
        } else {
          const int nib = i % 2 == 0 ? codes[i / 2] & 15 : codes[i / 2] >> 4;
          code = (float)(nib - 8);
        }
        const float v = code * scale;
        if (s.dtype == F32) std::memcpy(out + i * 4, &v, 4);
        else {
          const uint16_t h = f32_to_f16(v);
          std::memcpy(out + i * 2, &h, 2);
        }
      }
    }
    in += s.matrix_bytes(m);
  }
}

}  // namespace kvt
