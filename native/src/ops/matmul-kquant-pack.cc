// K-quant weight packing (at upload) into the panel layout of
// matmul-kquant.h, and the Q8_K-style activation quantizer. Compiled once:
// the packed layout and the quantized activations are the same for every ISA.
#include <algorithm>
#include <cmath>

#include "matmul-kquant.h"

namespace kvt {

size_t kquant_row_bytes(int dtype, int cols) { return (size_t)cols / kQKK * kq_spec(dtype).gguf_bytes; }

size_t kquant_packed_bytes(int dtype, int rows, int cols) {
  const size_t panels = ((size_t)rows + kPanel - 1) / kPanel;
  return panels * ((size_t)cols / kQKK) * kq_spec(dtype).bytes();
}

// Writes the W-bit fields (codes >> shift) of row j's 256 columns into a
// plane: each byte (unit u, load l, row j, column t) assembled once.
template <int W>
static void put_fields(uint8_t* plane, int j, const uint8_t* codes, int shift) {
  constexpr int per = 8 / W;  // groups per 64-byte load
  for (int u = 0; u < 8; ++u)
    for (int l = 0; l < W; ++l)
      for (int t = 0; t < 4; ++t) {
        int byte = 0;
        for (int s = 0; s < per; ++s) byte |= ((codes[u * 32 + (l * per + s) * 4 + t] >> shift) & ((1 << W) - 1)) << (s * W);
        plane[(u * W + l) * 64 + j * 4 + t] = (uint8_t)byte;
      }
}
static void put_plane(uint8_t* plane, int w, int j, const uint8_t* codes, int shift) {
  if (w == 4) put_fields<4>(plane, j, codes, shift);
  else if (w == 2) put_fields<2>(plane, j, codes, shift);
  else put_fields<1>(plane, j, codes, shift);
}

void pack_kquant(uint8_t* dst, int dtype, int rows, int cols, const uint8_t* src, size_t p0, size_t p1) {
  const KqSpec S = kq_spec(dtype);
  const int nsb = cols / kQKK;
  const size_t row_bytes = kquant_row_bytes(dtype, cols);
  KqBlock blk;
  for (size_t p = p0; p < p1; ++p) {
    for (int b = 0; b < nsb; ++b) {
      uint8_t* o = dst + (p * nsb + b) * S.bytes();
      std::memset(o, 0, S.bytes());
      uint16_t* d = reinterpret_cast<uint16_t*>(o);
      uint8_t* sc = o + S.scales_at();
      for (int j = 0; j < kPanel; ++j) {
        size_t n = p * kPanel + j;
        if (n >= (size_t)rows) continue;  // zero codes and scales: output discarded
        kquant_block_codes(dtype, src + n * row_bytes + (size_t)b * S.gguf_bytes, &blk);
        d[j] = blk.d;
        if (S.has_min) d[kPanel + j] = blk.dmin;
        for (int s = 0; s < S.nsub(); ++s) {
          if (S.scale_kind == 0) {
            sc[s * kPanel + j] = (uint8_t)blk.s[s];
            sc[128 + s * kPanel + j] = blk.m[s];
          } else if (S.scale_kind == 1) {
            sc[s * kPanel + j] = (uint8_t)(int8_t)blk.s[s];
          } else {
            sc[s * kPanel + j] = (uint8_t)(blk.s[s] | (blk.m[s] << 4));
          }
        }
        put_plane(o + S.lo_at(), S.lo_bits, j, blk.u, 0);
        if (S.hi_bits) put_plane(o + S.hi_at(), S.hi_bits, j, blk.u, S.lo_bits);
      }
    }
  }
}

// Per 256 values: d = amax/127, q = round_even(x / d); one function, so the
// same on every ISA (the ISA kernels and the reference twin all call it).
void quantize_rows_q8k(Q8KRows out, const float* x, int m, int k) {
  const int nsb = k / kQKK;
  for (int r = 0; r < m; ++r) {
    for (int b = 0; b < nsb; ++b) {
      const float* xb = x + (size_t)r * k + (size_t)b * kQKK;
      float amax = 0.0f;
      for (int i = 0; i < kQKK; ++i) amax = std::max(amax, std::fabs(xb[i]));
      float d = amax / 127.0f;
      float id = d != 0.0f ? 1.0f / d : 0.0f;
      int8_t* q = out.q + (size_t)r * k + (size_t)b * kQKK;
      int32_t* bs = out.bsum + (size_t)r * (k / 16) + (size_t)b * 16;
      // |x·id| <= 127 (+ rounding): adding and removing 1.5·2^23 rounds it to
      // an integer half-to-even, exactly as nearbyintf in the default mode,
      // but inline and vectorizable (nearbyintf is a libm call here).
      constexpr float kRound = 12582912.0f;
      for (int s = 0; s < 16; ++s) {
        int32_t sum = 0;
        for (int i = s * 16; i < s * 16 + 16; ++i) {
          float v = (xb[i] * id + kRound) - kRound;
          v = std::min(127.0f, std::max(-127.0f, v));
          q[i] = (int8_t)v;
          sum += q[i];
        }
        bs[s] = sum;
      }
      out.d[(size_t)r * nsb + b] = d;
    }
  }
}

}  // namespace kvt
